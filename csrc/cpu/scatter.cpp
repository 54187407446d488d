// Scatter of pooled elements into zeroed input-shaped planes (see scatter.h).
#include "scatter.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "../tensor_layout.h"
#include "argmax_check.h"
#include "tap_table.h"

namespace poolx {
namespace {

using isa_none::ArgmaxRule;

using at::Tensor;

constexpr int64_t kMaxBlock = 256;  // pooled elements whose targets are found at once

[[noreturn]] C10_NOINLINE void invalid_unpool_index(int64_t index, int64_t out_h, int64_t out_w) {
  TORCH_CHECK(false, "max_unpool2d: Found an invalid max index: ", index,
              " (output volumes are of size ", out_h, "x", out_w, ")");
}

// Targets from torch's int64 flat indices, each checked against the plane.
struct IndexTargets {
  static constexpr bool kRows = false;  // NCHW: a pixel at a time
  const int64_t* indices;
  int64_t out_h, out_w;

  void start_row(int64_t, int64_t, int64_t) const {}  // checked per group below

  const int64_t* operator()(int64_t, int64_t, int64_t, int64_t offset, int64_t n,
                            int64_t*) const {
    const int64_t* t = indices + offset;
    uint64_t furthest = 0;  // negatives compare as huge
    for (int64_t j = 0; j < n; ++j) furthest = std::max(furthest, static_cast<uint64_t>(t[j]));
    if (C10_UNLIKELY(furthest >= static_cast<uint64_t>(out_h * out_w))) {
      for (int64_t j = 0; j < n; ++j) {
        if (static_cast<uint64_t>(t[j]) >= static_cast<uint64_t>(out_h * out_w)) {
          invalid_unpool_index(t[j], out_h, out_w);
        }
      }
    }
    return t;
  }
};

// Targets from the compact argmax: the selected tap of each window, or -1 for
// a window with no tap inside the input. A value that names no tap of its
// window inside the input (argmax_check.h) sets *invalid, and its run targets
// nothing, as the tap table trusts the values it looks up: channels_last
// checks each row of windows as it starts (its runs are a pixel's channels,
// often few), NCHW each run as its targets are found.
// Element j belongs to window (ph, pw + j * pw_step). A window inside the
// input adds its tap's offset in the plane to its first tap's pixel; only
// windows at the border check rows and columns.
template <typename argmax_t>
struct ArgmaxTargets {
  static constexpr bool kRows = true;  // NCHW: pieces of rows
  const argmax_t* argmax;
  Pool2dGeometry g;
  const TapTable* taps;  // null: an int32 argmax, decoded by division
  const ArgmaxRule* rule;
  std::atomic<bool>* invalid;
  mutable bool row_checked = false, row_valid = true;

  // window row ph, its values from `offset`, `channels` a window
  void start_row(int64_t ph, int64_t offset, int64_t channels) const {
    row_checked = channels > 1;
    row_valid = !row_checked || rule->row_valid(argmax + offset, channels, ph);
  }

  const int64_t* targets_nothing(int64_t n, int64_t* scratch) const {
    invalid->store(true, std::memory_order_relaxed);
    std::fill_n(scratch, n, int64_t{-1});
    return scratch;
  }

  const int64_t* operator()(int64_t ph, int64_t pw, int64_t pw_step, int64_t offset, int64_t n,
                            int64_t* scratch) const {
    const argmax_t* a = argmax + offset;
    if (!row_valid) return targets_nothing(n, scratch);
    const int64_t h0 = ph * g.stride_h - g.pad_h;
    // the elements whose windows lie inside the input: [begin, end)
    int64_t begin = 0, end = 0;
    const int64_t room = g.in_w - 1 - (g.kernel_w - 1) * g.dilation_w + g.pad_w;
    if (taps != nullptr && room >= 0 && h0 >= 0 &&
        h0 + (g.kernel_h - 1) * g.dilation_h < g.in_h) {
      const int64_t first_pw = ceil_div_nonneg(g.pad_w, g.stride_w);  // the window starts >= 0
      const int64_t last_pw = div_nonneg(room, g.stride_w);           // and ends < in_w
      if (pw_step == 0) {
        end = pw >= first_pw && pw <= last_pw ? n : 0;
      } else {
        begin = std::clamp<int64_t>(first_pw - pw, 0, n);
        end = std::clamp<int64_t>(last_pw + 1 - pw, begin, n);
      }
    }
    const int64_t row = h0 * g.in_w - g.pad_w;
    const int64_t last_tap = g.kernel_h * g.kernel_w - 1;
    int64_t past = 0;  // negative: a value past the taps of these whole windows
    for (int64_t j = begin; j < end; ++j) {
      const uint8_t v = static_cast<uint8_t>(a[j]);
      scratch[j] = row + (pw + j * pw_step) * g.stride_w + taps->offset[v];
      past |= last_tap - v;
    }
    // elements [j0, j1) outside [begin, end): windows not wholly inside
    const auto border_valid = [&](int64_t j0, int64_t j1) {
      return j0 >= j1 || (pw_step == 0 ? rule->windows_valid(a + j0, ph, pw, pw + 1, j1 - j0)
                                       : rule->windows_valid(a + j0, ph, pw + j0, pw + j1, 1));
    };
    if (!row_checked && (past < 0 || !border_valid(0, begin) || !border_valid(end, n))) {
      return targets_nothing(n, scratch);
    }
    const auto border = [&](int64_t j) {
      const int64_t v = static_cast<int64_t>(a[j]);
      const int64_t h = h0 + v / g.kernel_w * g.dilation_h;
      const int64_t w = (pw + j * pw_step) * g.stride_w - g.pad_w + v % g.kernel_w * g.dilation_w;
      scratch[j] = h >= 0 && h < g.in_h && w >= 0 && w < g.in_w ? h * g.in_w + w : -1;
    };
    for (int64_t j = 0; j < begin; ++j) border(j);
    for (int64_t j = end; j < n; ++j) border(j);
    return scratch;
  }
};

// One task: `channels` planes whose element (pixel p, channel j) lies at
// p * channels + j, in the pooled tensor and in the output (NCHW: one plane;
// channels_last: an image).
// Elements move as bits (bits_t: an unsigned type of their size), so NaN
// payloads and -0.0 stay as they are; `values` null stores `fill`.
//
// The zero-fill is folded into the scatter: the task zeroes its output only
// up to the furthest pixel written so far (a block at a time), so each output
// line is zeroed just before it is written and leaves the cache once, instead
// of a whole-output fill that the scatter reads back. Stores go in row-major
// order within each plane, so the last one wins (torch's CPU unpool on one
// thread) on any number of threads.
template <typename bits_t, bool kChannelsLast, typename Targets>
void scatter_task(const bits_t* values, bits_t fill, const Targets& targets_of, bits_t* out,
                  int64_t pooled_h, int64_t pooled_w, int64_t out_pixels,
                  int64_t channels_arg) {
  const int64_t channels = kChannelsLast ? channels_arg : 1;  // also the pixel stride
  // pixels zeroed ahead of the furthest write: NCHW 1 KiB of float32 (a plane
  // is a few rows), channels_last up to 1 MiB, two output rows of a typical
  // image with tens of channels
  const int64_t zero_ahead =
      kChannelsLast ? std::max<int64_t>(64, (1 << 20) / (channels * sizeof(bits_t))) : 256;
  int64_t zeroed = 0;  // pixels [0, zeroed) are zero or written
  const auto zero_until = [&](int64_t end) {
    if (end > zeroed) {
      std::memset(static_cast<void*>(out + zeroed * channels), 0,
                  (end - zeroed) * channels * sizeof(bits_t));
      zeroed = end;
    }
  };
  // A group of pooled elements at a time: a pixel's channels (channels_last)
  // or, in NCHW, a pixel, or up to kMaxBlock pixels of a row where the
  // targets cost more to find alone (Targets::kRows); element j at offset + j.
  const int64_t group =
      kChannelsLast ? channels : (Targets::kRows ? std::min(pooled_w, kMaxBlock) : 1);
  int64_t scratch[kMaxBlock];
  for (int64_t ph = 0; ph < pooled_h; ++ph) {
    targets_of.start_row(ph, ph * pooled_w * channels, channels);
    for (int64_t pw = 0; pw < pooled_w; pw += kChannelsLast ? 1 : group) {
      // channels_last: a pixel's channels, kMaxBlock at a time
      for (int64_t c0 = 0; c0 < channels; c0 += kMaxBlock) {
        const int64_t n = kChannelsLast ? std::min(kMaxBlock, channels - c0)
                                        : std::min(group, pooled_w - pw);
        const int64_t offset = (ph * pooled_w + pw) * channels + c0;
        const int64_t* t = targets_of(ph, pw, kChannelsLast ? 0 : 1, offset, n, scratch);
        int64_t furthest = -1;
        for (int64_t j = 0; j < n; ++j) furthest = std::max(furthest, t[j]);
        if (furthest >= zeroed) zero_until(std::min(out_pixels, furthest + zero_ahead));
        for (int64_t j = 0; j < n; ++j) {
          // channels_last: channel c0 + j of pixel t; NCHW: pixel t
          const int64_t to = kChannelsLast ? t[j] * channels + c0 + j : t[j];
          if (t[j] >= 0) out[to] = values ? values[offset + j] : fill;
        }
      }
    }
  }
  zero_until(out_pixels);
}

// Runs scatter_task over every plane: a task per plane (NCHW) or per image
// (channels_last). Splitting an image's channels between tasks, for batches
// smaller than the thread count, measured several times slower than one task
// per image: each task then zeroes or writes a few bytes of every pixel.
// make_targets(first) gives the targets of a task whose first pooled element
// is at offset `first`.
template <typename bits_t, typename MakeTargets>
void scatter_planes(Layout4d pooled, const Layout4d& out_l, const Tensor& values, bits_t fill,
                    const Tensor& out, const MakeTargets& make_targets) {
  // A 1x1 pooled plane reads as NCHW (both formats address it alike) beside a
  // channels_last output; a single channel makes both formats alike.
  const bool cl = pooled.channels_last || out_l.channels_last;
  const int64_t in_pixels = pooled.h * pooled.w, out_pixels = out_l.h * out_l.w;
  const auto* v = values.defined() ? static_cast<const bits_t*>(values.const_data_ptr()) : nullptr;
  auto* o = static_cast<bits_t*>(out.mutable_data_ptr());
  at::parallel_for(0, cl ? pooled.n : pooled.n * pooled.c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t in_first = task * (cl ? pooled.c : 1) * in_pixels;
      const int64_t out_first = task * (cl ? pooled.c : 1) * out_pixels;
      const auto targets = make_targets(in_first);
      const bits_t* task_values = v ? v + in_first : nullptr;
      if (cl) {
        scatter_task<bits_t, true>(task_values, fill, targets, o + out_first, pooled.h, pooled.w,
                                   out_pixels, pooled.c);
      } else {
        scatter_task<bits_t, false>(task_values, fill, targets, o + out_first, pooled.h,
                                    pooled.w, out_pixels, 1);
      }
    }
  });
}

// f with a null pointer of the unsigned type of `bytes` bytes.
template <typename F>
void dispatch_bits(int64_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(static_cast<uint8_t*>(nullptr));
    case 2: return f(static_cast<uint16_t*>(nullptr));
    case 4: return f(static_cast<uint32_t*>(nullptr));
    default: TORCH_INTERNAL_ASSERT(bytes == 8); return f(static_cast<uint64_t*>(nullptr));
  }
}

}  // namespace

void max_unpool2d_indices_cpu(const Tensor& values, const Tensor& indices, const Tensor& out) {
  const Layout4d out_l = layout_of(out);
  const int64_t* idx = indices.const_data_ptr<int64_t>();
  dispatch_bits(values.element_size(), [&](auto* tag) {
    using bits_t = std::remove_pointer_t<decltype(tag)>;
    scatter_planes<bits_t>(layout_of(values), out_l, values, bits_t(0), out, [&](int64_t first) {
      return IndexTargets{idx + first, out_l.h, out_l.w};
    });
  });
}

bool scatter_by_argmax_cpu(const Tensor& values, const Tensor& argmax, const Tensor& out,
                           const Pool2dGeometry& g) {
  const TapTable taps(g);
  const ArgmaxRule rule(g);
  std::atomic<bool> invalid{false};
  const bool by_table = argmax.scalar_type() == at::kByte;
  const int64_t bytes = values.defined() ? values.element_size() : 1;
  dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
    using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
    const argmax_t* am = argmax.const_data_ptr<argmax_t>();
    dispatch_bits(bytes, [&](auto* tag) {
      using bits_t = std::remove_pointer_t<decltype(tag)>;
      // a mask stores true: the bits of a bool
      scatter_planes<bits_t>(layout_of(argmax), layout_of(out), values, bits_t(1), out,
                             [&](int64_t first) {
        return ArgmaxTargets<argmax_t>{am + first, g, by_table ? &taps : nullptr, &rule,
                                       &invalid};
      });
    });
  });
  return !invalid;
}

}  // namespace poolx
