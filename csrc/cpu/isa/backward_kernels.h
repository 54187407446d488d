// Vectorized backward: NCHW tiled with kernel_w == 2 (even/odd interleave),
// NCHW float32 by a per-plane scatter, channels_last along C (any geometry).
#pragma once

#include <ATen/Parallel.h>

#include <cstring>

#include "forward_kernels.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

template <typename T>
inline void fill_zero(T* p, int64_t n) {
  std::fill(p, p + n, T(0));
}

// Tiled, kernel_w == 2: every input row is written once, from one output row
// (or zeros where floor mode dropped it).
template <typename T>
void backward_nchw_tiled_w2(const FastBackwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const T* go = static_cast<const T*>(a.grad_output);
  T* gi = static_cast<T*>(a.grad_input);
  const int64_t rows = a.in_l.n * a.in_l.c * g.in_h;
  at::parallel_for(0, rows, grain_for(g.in_w), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t plane = r / g.in_h, ih = r % g.in_h;
      const int64_t oh = ih / g.kernel_h, kh = ih % g.kernel_h;
      T* gi_row = gi + r * g.in_w;
      if (oh >= g.out_h) {
        fill_zero(gi_row, g.in_w);
        continue;
      }
      const int64_t o_row = (plane * g.out_h + oh) * g.out_w;
      for (int64_t ow0 = 0; ow0 < g.out_w; ow0 += kLanes) {
        const int64_t n = std::min(kLanes, g.out_w - ow0);
        const Vec grad = load_float(go + o_row + ow0, n);
        const Vec argmax = load_argmax(a.argmax + o_row + ow0, n);
        store_even_odd(gi_row + 2 * ow0, select_grad(grad, argmax, kh * 2),
                       select_grad(grad, argmax, kh * 2 + 1), 2 * n);
      }
      fill_zero(gi_row + 2 * g.out_w, g.in_w - 2 * g.out_w);
    }
  });
}

// Any geometry, float32: zero one plane (cache-resident), then add each
// output's gradient at its selected tap in output order, the order in which
// the per-element gather sums, so results agree bit for bit.
inline void backward_nchw_scatter(const FastBackwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const float* go = static_cast<const float*>(a.grad_output);
  float* gi = static_cast<float*>(a.grad_input);
  const int64_t planes = a.in_l.n * a.in_l.c;
  at::parallel_for(0, planes, grain_for(g.in_h * g.in_w), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      float* gi_plane = gi + p * g.in_h * g.in_w;
      fill_zero(gi_plane, g.in_h * g.in_w);
      const float* go_plane = go + p * g.out_h * g.out_w;
      const uint8_t* am_plane = a.argmax + p * g.out_h * g.out_w;
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const int64_t o = oh * g.out_w + ow;
          const InputPos at = decode_argmax(am_plane[o], g, oh, ow);
          if (at.inside(g)) gi_plane[at.h * g.in_w + at.w] += go_plane[o];
        }
      }
    }
  });
}

// channels_last, any geometry: each input pixel gathers, kLanes channels at
// a time, from the windows covering it in output order.
template <typename T>
void backward_channels_last(const FastBackwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const int64_t C = a.in_l.c;
  const T* go = static_cast<const T*>(a.grad_output);
  T* gi = static_cast<T*>(a.grad_input);
  const int64_t rows = a.in_l.n * g.in_h;
  at::parallel_for(0, rows, grain_for(g.in_w * C), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t n_img = r / g.in_h, ih = r % g.in_h;
      const TapRange ohs =
          windows_covering(ih, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h, g.out_h);
      for (int64_t iw = 0; iw < g.in_w; ++iw) {
        const TapRange ows =
            windows_covering(iw, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w, g.out_w);
        T* gi_px = gi + (r * g.in_w + iw) * C;
        for (int64_t c0 = 0; c0 < C; c0 += kLanes) {
          const int64_t n = std::min(kLanes, C - c0);
          Vec sum(0.f);
          for (int64_t oh = ohs.begin; oh < ohs.end; ++oh) {
            const int64_t kh = tap_of(ih, oh, g.stride_h, g.pad_h, g.dilation_h);
            if (kh < 0) continue;
            for (int64_t ow = ows.begin; ow < ows.end; ++ow) {
              const int64_t kw = tap_of(iw, ow, g.stride_w, g.pad_w, g.dilation_w);
              if (kw < 0) continue;
              const int64_t o = ((n_img * g.out_h + oh) * g.out_w + ow) * C + c0;
              // sum + 0 == sum here: a sum that starts at +0 is never -0
              sum = sum + select_grad(load_float(go + o, n), load_argmax(a.argmax + o, n),
                                      kh * g.kernel_w + kw);
            }
          }
          store_float(gi_px + c0, sum, n);
        }
      }
    }
  });
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
