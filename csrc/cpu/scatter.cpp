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

using isa_none::all_below;
using isa_none::ArgmaxRule;

using at::Tensor;

constexpr int64_t kMaxBlock = 256;  // pooled elements placed as one group

[[noreturn]] C10_NOINLINE void invalid_unpool_index(int64_t index, int64_t out_h, int64_t out_w) {
  TORCH_CHECK(false, "max_unpool2d: Found an invalid max index: ", index,
              " (output volumes are of size ", out_h, "x", out_w, ")");
}

// The largest of t[0, n) as unsigned (a negative compares as huge), four
// running maxima so that no compare waits for the one before.
inline uint64_t unsigned_max(const int64_t* t, int64_t n) {
  uint64_t m[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (int k = 0; k < 4; ++k) m[k] = std::max(m[k], static_cast<uint64_t>(t[j + k]));
  }
  for (; j < n; ++j) m[0] = std::max(m[0], static_cast<uint64_t>(t[j]));
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

// Targets place a group of pooled elements: `pixels` windows from (ph, pw),
// `channels` elements each (element j = i * channels + c is channel c of
// window (ph, pw + i)). Each checks the group's keys, then calls
// zero_until(p) with p at least the furthest pixel it will place at, then
// place(j, c, pixel) for each element that lands in the plane, in order.

// Targets from torch's int64 flat indices, each checked against the plane.
struct IndexTargets {
  const int64_t* indices;
  int64_t out_h, out_w;

  void start_row(int64_t, int64_t, int64_t) const {}  // checked per group below

  template <typename ZeroUntil, typename Place>
  void operator()(int64_t, int64_t, int64_t pixels, int64_t channels, int64_t offset,
                  const ZeroUntil& zero_until, const Place& place) const {
    const int64_t* t = indices + offset;
    const int64_t n = pixels * channels;
    // the indices are the widest stream and the stores leave the hardware
    // prefetcher little room: fetch them 8 KiB ahead
    for (int64_t j = 0; j < n; j += 8) __builtin_prefetch(t + 1024 + j);
    const uint64_t most = unsigned_max(t, n);
    if (C10_UNLIKELY(most >= static_cast<uint64_t>(out_h * out_w))) {
      for (int64_t j = 0; j < n; ++j) {
        if (static_cast<uint64_t>(t[j]) >= static_cast<uint64_t>(out_h * out_w)) {
          invalid_unpool_index(t[j], out_h, out_w);
        }
      }
    }
    zero_until(static_cast<int64_t>(most));
    for (int64_t i = 0; i < pixels; ++i) {
      for (int64_t c = 0; c < channels; ++c) place(i * channels + c, c, t[i * channels + c]);
    }
  }
};

// Targets from the compact argmax: the selected tap of each window; a window
// with no tap inside the input places nothing. A group holding a value that
// names no tap of its window inside the input (argmax_check.h) sets *invalid
// and places nothing, as the tap table trusts the values it looks up:
// channels_last checks each row of windows as it starts, NCHW each group. A
// window inside the input adds its tap's offset in the plane to its first
// tap's pixel; only windows at the border check rows and columns.
template <typename argmax_t>
struct ArgmaxTargets {
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

  template <typename ZeroUntil, typename Place>
  void operator()(int64_t ph, int64_t pw, int64_t pixels, int64_t channels, int64_t offset,
                  const ZeroUntil& zero_until, const Place& place) const {
    const argmax_t* a = argmax + offset;
    const int64_t h0 = ph * g.stride_h - g.pad_h;
    // the windows lying inside the input: [begin, end)
    int64_t begin = 0, end = 0;
    const int64_t room = g.in_w - 1 - (g.kernel_w - 1) * g.dilation_w + g.pad_w;
    if (taps != nullptr && room >= 0 && h0 >= 0 &&
        h0 + (g.kernel_h - 1) * g.dilation_h < g.in_h) {
      const int64_t first_pw = ceil_div_nonneg(g.pad_w, g.stride_w);  // the window starts >= 0
      const int64_t last_pw = div_nonneg(room, g.stride_w);           // and ends < in_w
      begin = std::clamp<int64_t>(first_pw - pw, 0, pixels);
      end = std::clamp<int64_t>(last_pw + 1 - pw, begin, pixels);
    }
    // windows [i0, i1) outside [begin, end): not wholly inside
    const auto border_valid = [&](int64_t i0, int64_t i1) {
      return i0 >= i1 || rule->windows_valid(a + i0 * channels, ph, pw + i0, pw + i1, channels);
    };
    const bool valid = row_checked ? row_valid
                                   : all_below(a + begin * channels, (end - begin) * channels,
                                               g.kernel_h * g.kernel_w) &&
                                         border_valid(0, begin) && border_valid(end, pixels);
    if (!valid) {
      invalid->store(true, std::memory_order_relaxed);
      return;
    }
    // the last tap of the last window
    zero_until((h0 + (g.kernel_h - 1) * g.dilation_h) * g.in_w +
               (pw + pixels - 1) * g.stride_w - g.pad_w + (g.kernel_w - 1) * g.dilation_w);
    const auto border = [&](int64_t i) {
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t v = static_cast<int64_t>(a[i * channels + c]);
        const int64_t h = h0 + v / g.kernel_w * g.dilation_h;
        const int64_t w = (pw + i) * g.stride_w - g.pad_w + v % g.kernel_w * g.dilation_w;
        if (h >= 0 && h < g.in_h && w >= 0 && w < g.in_w) place(i * channels + c, c, h * g.in_w + w);
      }
    };
    for (int64_t i = 0; i < begin; ++i) border(i);
    const int64_t row = h0 * g.in_w - g.pad_w;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t first_tap = row + (pw + i) * g.stride_w;
      for (int64_t c = 0; c < channels; ++c) {
        place(i * channels + c, c, first_tap + taps->offset[static_cast<uint8_t>(a[i * channels + c])]);
      }
    }
    for (int64_t i = end; i < pixels; ++i) border(i);
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
  // pixels zeroed ahead of the furthest write: NCHW 16 KiB (a plane is a
  // few such blocks; memset writes blocks this large as whole lines, without
  // first reading each line as smaller ones do), channels_last up to 1 MiB,
  // two output rows of a typical image with tens of channels
  const int64_t zero_ahead =
      kChannelsLast ? std::max<int64_t>(64, (1 << 20) / (channels * sizeof(bits_t)))
                    : (16 << 10) / static_cast<int64_t>(sizeof(bits_t));
  int64_t zeroed = 0;  // pixels [0, zeroed) are zero or written
  const auto zero_until = [&](int64_t end) {
    if (end > zeroed) {
      std::memset(static_cast<void*>(out + zeroed * channels), 0,
                  (end - zeroed) * channels * sizeof(bits_t));
      zeroed = end;
    }
  };
  // A group of pooled elements at a time: up to kMaxBlock pixels of a row in
  // NCHW; in channels_last as many whole pixels as fit in kMaxBlock (few
  // channels: much of a row) or a pixel's channels kMaxBlock at a time.
  const int64_t group_pixels = std::max<int64_t>(1, kMaxBlock / channels);
  const int64_t group_c = std::min(channels, kMaxBlock);
  for (int64_t ph = 0; ph < pooled_h; ++ph) {
    targets_of.start_row(ph, ph * pooled_w * channels, channels);
    for (int64_t pw = 0; pw < pooled_w; pw += group_pixels) {
      const int64_t pixels = std::min(group_pixels, pooled_w - pw);
      for (int64_t c0 = 0; c0 < channels; c0 += group_c) {
        const int64_t offset = (ph * pooled_w + pw) * channels + c0;
        const bits_t* v = values ? values + offset : nullptr;
        bits_t* o = out + c0;
        targets_of(ph, pw, pixels, std::min(group_c, channels - c0), offset,
                   [&](int64_t furthest) {
                     if (furthest >= zeroed) {
                       zero_until(std::min(out_pixels, furthest + zero_ahead));
                     }
                   },
                   [&](int64_t j, int64_t c, int64_t pixel) {
                     o[pixel * channels + c] = v ? v[j] : fill;
                   });
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
