// Scatter of pooled elements into zeroed input-shaped planes (see scatter.h).
#include "scatter.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "../dispatch.h"
#include "../tensor_layout.h"
#include "argmax_check.h"
#include "fast_paths.h"
#include "scatter_targets.h"
#include "tap_table.h"

namespace poolx {
namespace {

using isa_none::ArgmaxRule;
using isa_none::TapTable;
using scatter_targets::ArgmaxTargets;
using scatter_targets::IndexTargets;
using at::Tensor;

constexpr int64_t kMaxBlock = 256;  // pooled elements placed as one group

// Stores pooled element j (channel c) at `pixel`, or `fill` where values is null.
template <typename bits_t>
struct Placer {
  const bits_t* values;
  bits_t fill;
  bits_t* out;
  int64_t pixel_stride;  // channels_last: C; NCHW: 1
  bool avx512;           // the CPU (and ATEN_CPU_CAPABILITY) allows AVX-512

  void operator()(int64_t j, int64_t c, int64_t pixel) const {
    out[pixel * pixel_stride + c] = values ? values[j] : fill;
  }

  // `pixels` pixels of `channels` elements each, element j at t[j]. Within a
  // pixel the channels' targets differ (pixel * C + c, one c each), so on
  // AVX-512 the channel loop stores them as vector scatters.
  void pixels(const int64_t* t, int64_t pixels, int64_t channels) const {
    if (avx512 && values != nullptr && pixel_stride > 1) {
      place_pixels(values, t, out, pixels, channels, pixel_stride);
      return;
    }
    for (int64_t i = 0; i < pixels; ++i) {
      for (int64_t c = 0; c < channels; ++c) (*this)(i * channels + c, c, t[i * channels + c]);
    }
  }

  POOLX_TARGET_AVX512 static void place_pixels(const bits_t* v, const int64_t* t, bits_t* o,
                                               int64_t pixels, int64_t channels, int64_t stride) {
    for (int64_t i = 0; i < pixels; ++i) {
      const int64_t* ti = t + i * channels;
      const bits_t* vi = v + i * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c) o[ti[c] * stride + c] = vi[c];
    }
  }
};

template <typename bits_t, bool kChannelsLast, typename Targets>
void scatter_task(const bits_t* values, bits_t fill, const Targets& targets_of, bits_t* out,
                  int64_t pooled_h, int64_t pooled_w, int64_t out_pixels,
                  int64_t channels_arg, bool avx512) {
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
                   Placer<bits_t>{v, fill, o, channels, avx512});
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
  const bool avx512 = cpu_has_avx512();
  at::parallel_for(0, cl ? pooled.n : pooled.n * pooled.c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t in_first = task * (cl ? pooled.c : 1) * in_pixels;
      const int64_t out_first = task * (cl ? pooled.c : 1) * out_pixels;
      const auto targets = make_targets(in_first);
      const bits_t* task_values = v ? v + in_first : nullptr;
      if (cl) {
        scatter_task<bits_t, true>(task_values, fill, targets, o + out_first, pooled.h, pooled.w,
                                   out_pixels, pooled.c, avx512);
      } else {
        scatter_task<bits_t, false>(task_values, fill, targets, o + out_first, pooled.h,
                                    pooled.w, out_pixels, 1, avx512);
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
