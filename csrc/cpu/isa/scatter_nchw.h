// NCHW backward, any geometry, by a per-plane scatter: each output's gradient
// is added at its selected tap in output order, the order in which torch's
// CPU kernel and the per-element gather sum, so results agree bit for bit.
// 16-bit sums round to T after every add, as torch adds into the element type.
//
// A plane is summed in a float scratch that stays in the cache, then written
// to grad_input once (streamed where the gradient is large), the scratch
// zeroed as it is read: grad_input is written, never read. Summed in
// grad_input itself, every line of it would be read for the zero-fill first.
// Planes too large for the cache are summed in place.
#pragma once

#include <ATen/Parallel.h>

#include <array>
#include <type_traits>
#include <vector>

#include "../argmax_check.h"
#include "forward_kernels.h"
#include "stream_stores.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// sum + grad rounded to T, as torch's add into a T rounds it. Sum: T itself,
// or float holding T values (the scratch).
template <typename T, typename Sum>
inline Sum add_rounded(Sum sum, float grad) {
  const float exact = static_cast<float>(sum) + grad;
  if constexpr (std::is_same_v<Sum, T>) {
    return narrow<T>(exact);
  } else if constexpr (std::is_same_v<T, c10::BFloat16>) {
    return round_to_bfloat16(exact);
  } else {
    return static_cast<float>(static_cast<T>(exact));
  }
}

// The scatter of one plane's output gradients into its sums. Each row of
// argmax is checked before it is used: a value past the taps reads tap 0 of
// the table (in bounds for the interior windows that index with it).
template <typename T>
class PlaneScatter {
 public:
  explicit PlaneScatter(const Pool2dGeometry& g)
      : g_(g), rule_(g),
        // windows wholly inside the input need no bounds check
        rows_(interior_outputs(g.in_h, g.out_h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h)),
        cols_(interior_outputs(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w)) {
    // tap -> (row, column) offset inside the window; no division per output
    for (int64_t t = 0; t < g.kernel_h * g.kernel_w; ++t) {
      tap_h_[t] = static_cast<int32_t>((t / g.kernel_w) * g.dilation_h);
      tap_w_[t] = static_cast<int32_t>((t % g.kernel_w) * g.dilation_w);
      tap_offset_[t] = static_cast<int32_t>(tap_h_[t] * g.in_w + tap_w_[t]);
    }
  }

  // Adds the plane's gradients into sums (zero on entry); false if an argmax
  // is invalid.
  template <typename Sum>
  bool add(const T* go_row, const uint8_t* am_row, Sum* sums) const {
    const Pool2dGeometry& g = g_;
    bool valid = true;
    const auto add = [&](Sum& sum, int64_t ow) {
      sum = add_rounded<T>(sum, static_cast<float>(go_row[ow]));
    };
    for (int64_t oh = 0; oh < g.out_h; ++oh, go_row += g.out_w, am_row += g.out_w) {
      valid &= rule_.row_valid(am_row, 1, oh);
      const int64_t h0 = oh * g.stride_h - g.pad_h;
      const auto add_checked = [&](int64_t ow_begin, int64_t ow_end) {
        for (int64_t ow = ow_begin; ow < ow_end; ++ow) {
          const int64_t ih = h0 + tap_h_[am_row[ow]];
          const int64_t iw = ow * g.stride_w - g.pad_w + tap_w_[am_row[ow]];
          if (ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w) add(sums[ih * g.in_w + iw], ow);
        }
      };
      if (oh < rows_.begin || oh >= rows_.end || cols_.begin == cols_.end) {
        add_checked(0, g.out_w);
      } else {
        add_checked(0, cols_.begin);
        for (int64_t ow = cols_.begin; ow < cols_.end; ++ow) {
          add(sums[h0 * g.in_w + ow * g.stride_w - g.pad_w + tap_offset_[am_row[ow]]], ow);
        }
        add_checked(cols_.end, g.out_w);
      }
    }
    return valid;
  }

 private:
  const Pool2dGeometry g_;
  const ArgmaxRule rule_;
  const TapRange rows_, cols_;
  std::array<int32_t, 256> tap_h_{}, tap_w_{}, tap_offset_{};
};

// sums (T values) to out, exactly; sums left zero.
template <typename T>
inline void move_sums(float* sums, T* out, int64_t n, bool stream) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    store_lanes(out + i, Vec::loadu(sums + i), kLanes, stream);
    Vec(0.f).store(sums + i);
  }
  for (; i < n; ++i) {
    out[i] = static_cast<T>(sums[i]);
    sums[i] = 0.f;
  }
}

// Planes whose float sums take at most this many bytes are summed in a
// scratch: half the L2 cache, beside the rows of gradient and argmax.
constexpr int64_t kScratchMaxBytes = 256 * 1024;

template <typename T>
void backward_nchw_scatter(const FastBackwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const T* const go = static_cast<const T*>(a.grad_output);
  T* const gi = static_cast<T*>(a.grad_input);
  const PlaneScatter<T> scatter(g);
  const int64_t plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const int64_t planes = a.in_l.n * a.in_l.c;
  const bool in_scratch = plane * static_cast<int64_t>(sizeof(float)) <= kScratchMaxBytes;
  // streamed whole: every plane then starts a cache line
  const bool stream = in_scratch && worth_streaming(gi, planes * plane) &&
                      plane * static_cast<int64_t>(sizeof(T)) % 64 == 0;
  at::parallel_for(0, planes, grain_for(plane), [&](int64_t b, int64_t e) {
    bool valid = true;
    std::vector<float> sums(in_scratch ? plane : 0);
    for (int64_t p = b; p < e; ++p) {
      const T* go_plane = go + p * out_plane;
      const uint8_t* am_plane = a.argmax + p * out_plane;
      T* gi_plane = gi + p * plane;
      if (in_scratch) {
        valid &= scatter.add(go_plane, am_plane, sums.data());
        move_sums(sums.data(), gi_plane, plane, stream);
      } else {
        fill_zero(gi_plane, plane);
        valid &= scatter.add(go_plane, am_plane, gi_plane);
      }
    }
    if (!valid) a.argmax_invalid->store(true, std::memory_order_relaxed);
    if (stream) stream_fence();
  });
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
