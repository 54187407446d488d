// channels_last kernels for any window geometry (overlapping, padded, dilated
// windows too): a thread handles V adjacent channels of one pixel, so the
// index arithmetic of a pixel is done once for V channels and every access is
// one vector load or store. Per lane they compute what the element functions
// compute, in the same order: the forward is max_pool2d_forward_elem, the
// gather is max_pool2d_backward_elem / max_unpool2d_argmax_elem. The argmax
// is 1 byte per element.
#pragma once

#include <c10/macros/Macros.h>

#include <type_traits>

#include "cuda_common.cuh"
#include "launchers.h"
#include "poolx/element_ops.h"
#include "tiled_route.cuh"

namespace poolx {
namespace cuda_launch {

// Forward: max, argmax and index of V channels of one output pixel.
template <typename scalar_t, int V, bool kWithArgmax>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    cl_forward_kernel(const scalar_t* __restrict__ input, scalar_t* __restrict__ values,
                      uint8_t* __restrict__ argmax, int64_t* __restrict__ indices,
                      Layout4d in_l, Layout4d out_l, Pool2dGeometry g) {
  using A = acc_t<scalar_t>;
  const PlaneStrides s = in_l.plane_strides();
  const int64_t total = out_l.numel() / V;
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t o = t * V;
    const Layout4d::Coord p = out_l.coord(o);
    const int64_t h0 = p.h * g.stride_h - g.pad_h, w0 = p.w * g.stride_w - g.pad_w;
    const TapRange rows = window_taps(h0, g.kernel_h, g.dilation_h, g.in_h);
    const TapRange cols = window_taps(w0, g.kernel_w, g.dilation_w, g.in_w);
    const scalar_t* plane = input + in_l.plane_offset(p.n, p.c);
    // a window with no tap inside the input reports its first tap, as the element function
    const uint8_t first_tap = static_cast<uint8_t>(rows.begin * g.kernel_w + cols.begin);
    A best[V];
    uint8_t arg[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      best[i] = lowest_value<A>();
      arg[i] = first_tap;
    }
    for (int64_t kh = rows.begin; kh < rows.end; ++kh) {
      const scalar_t* row = plane + (h0 + kh * g.dilation_h) * s.h;
#pragma unroll 1
      for (int64_t kw = cols.begin; kw < cols.end; ++kw) {
        scalar_t x[V];
        load_vectors<V>(row + (w0 + kw * g.dilation_w) * s.w, x);
        const uint8_t tap = static_cast<uint8_t>(kh * g.kernel_w + kw);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const A v = static_cast<A>(x[i]);
          if (replaces_max(v, best[i])) {
            best[i] = v;
            arg[i] = tap;
          }
        }
      }
    }
    scalar_t out[V];
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = static_cast<scalar_t>(best[i]);
    store_vectors<V>(values + o, out);
    if (kWithArgmax) store_vectors<V>(argmax + o, arg);
    if (kWithArgmax && indices != nullptr) {
#pragma unroll
      for (int i = 0; i < V; ++i) indices[o + i] = argmax_to_index_elem(arg[i], g, p.h, p.w);
    }
  }
}

// Whether each of the V argmax bytes of window (oh, ow) names a tap of it
// inside the input (argmax_is_valid for a window with such a tap).
template <int V>
__device__ __forceinline__ bool taps_inside(const uint8_t* tap, const Pool2dGeometry& g,
                                            int64_t oh, int64_t ow) {
  const int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
  bool inside = true;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t kh = div_nonneg(int64_t{tap[i]}, g.kernel_w), kw = tap[i] - kh * g.kernel_w;
    const int64_t h = h0 + kh * g.dilation_h, w = w0 + kw * g.dilation_w;
    inside &= kh < g.kernel_h && h >= 0 && h < g.in_h && w >= 0 && w < g.in_w;
  }
  return inside;
}

// Backward (kSum) and unpool by argmax (kCopy): V channels of one input
// pixel gathered from every window that selected them, in output order. A
// thread also checks the argmax bytes of each window whose first in-bounds
// tap its pixel is, so the byte of every window with a tap inside the input
// is checked once, and a bad one fires a device-side assert.
template <Route R, typename scalar_t, int V>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    cl_gather_kernel(const scalar_t* __restrict__ src, const uint8_t* __restrict__ argmax,
                     scalar_t* __restrict__ dst, Layout4d out_l, Layout4d in_l,
                     Pool2dGeometry g) {
  using Acc = std::conditional_t<R == Route::kSum, acc_t<scalar_t>, scalar_t>;
  const PlaneStrides so = out_l.plane_strides();
  const int64_t total = in_l.numel() / V;
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t i = t * V;
    const Layout4d::Coord p = in_l.coord(i);
    const TapRange ohs =
        windows_covering(p.h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h, g.out_h);
    const TapRange ows =
        windows_covering(p.w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w, g.out_w);
    const int64_t plane = out_l.plane_offset(p.n, p.c);
    Acc acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = Acc(0);
    bool valid = true;
    for (int64_t oh = ohs.begin; oh < ohs.end; ++oh) {
      const int64_t kh = tap_of(p.h, oh, g.stride_h, g.pad_h, g.dilation_h);
      if (kh < 0) continue;
      const bool first_row = kh == 0 || p.h < g.dilation_h;  // no tap of the window above
#pragma unroll 1
      for (int64_t ow = ows.begin; ow < ows.end; ++ow) {
        const int64_t kw = tap_of(p.w, ow, g.stride_w, g.pad_w, g.dilation_w);
        if (kw < 0) continue;
        const int64_t o = plane + oh * so.h + ow * so.w;
        uint8_t tap[V];
        load_vectors<V>(argmax + o, tap);
        if (first_row && (kw == 0 || p.w < g.dilation_w)) valid &= taps_inside<V>(tap, g, oh, ow);
        const int64_t here = kh * g.kernel_w + kw;
        bool any = false;
#pragma unroll
        for (int k = 0; k < V; ++k) any |= tap[k] == here;
        if (!any) continue;
        scalar_t v[V];
        load_vectors<V>(src + o, v);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          if (tap[k] != here) continue;
          if constexpr (R == Route::kSum) {
            acc[k] = acc[k] + static_cast<Acc>(v[k]);
          } else {
            acc[k] = v[k];
          }
        }
      }
    }
    POOLX_ASSERT_ARGMAX(valid);
    scalar_t out[V];
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = static_cast<scalar_t>(acc[k]);
    store_vectors<V>(dst + i, out);
  }
}

// Channels per thread for the channels_last kernels (channel_lanes), or 0
// where they do not apply: a tensor not channels_last, a volume, or a window
// of more taps than a 1-byte argmax names, or adaptive windows.
template <typename scalar_t>
int cl_lanes(const Layout4d& a, const Layout4d& b, const Pool2dGeometry& g,
             std::initializer_list<const void*> elements, const void* argmax) {
  if (!a.channels_last || !b.channels_last || !g.planar() || g.adaptive() ||
      g.kernel_h * g.kernel_w > 256) {
    return 0;
  }
  return channel_lanes<scalar_t>(a, elements, argmax, /*tap_bytes=*/1);
}

// The forward over channels_last tensors with a 1-byte argmax (or none), if
// cl_lanes finds lanes; returns false if it does not.
template <typename scalar_t>
bool try_cl_forward(const scalar_t* input, scalar_t* values, uint8_t* argmax, int64_t* indices,
                    const Layout4d& in_l, const Layout4d& out_l, const Pool2dGeometry& g,
                    cudaStream_t stream, cudaError_t* err) {
  const int lanes = cl_lanes<scalar_t>(in_l, out_l, g, {input, values}, argmax);
  if (lanes == 0) return false;
  *err = with_lanes<scalar_t>(lanes, [&](auto v) {
    constexpr int kV = decltype(v)::value;
    return argmax == nullptr
               ? launch(cl_forward_kernel<scalar_t, kV, false>, out_l.numel() / kV, stream, input,
                        values, argmax, indices, in_l, out_l, g)
               : launch(cl_forward_kernel<scalar_t, kV, true>, out_l.numel() / kV, stream, input,
                        values, argmax, indices, in_l, out_l, g);
  });
  return true;
}

// The gather (R) from pooled-shaped `src` into input-shaped
// `dst`, if cl_lanes finds lanes; returns false if it does not.
template <Route R, typename scalar_t>
bool try_cl_gather(const scalar_t* src, const uint8_t* argmax, scalar_t* dst,
                   const Layout4d& out_l, const Layout4d& in_l, const Pool2dGeometry& g,
                   cudaStream_t stream, cudaError_t* err) {
  const int lanes = cl_lanes<scalar_t>(out_l, in_l, g, {src, dst}, argmax);
  if (lanes == 0) return false;
  // A window with no tap inside the input (only dilation makes one) is no
  // pixel's to check: the check pass covers every byte first.
  if (g.dilation_h > 1 || g.dilation_w > 1) {
    *err = check_argmax(argmax, out_l, g, stream);
    if (*err != cudaSuccess) return true;
  }
  *err = with_lanes<scalar_t>(lanes, [&](auto v) {
    constexpr int kV = decltype(v)::value;
    return launch(cl_gather_kernel<R, scalar_t, kV>, in_l.numel() / kV, stream, src, argmax, dst,
                  out_l, in_l, g);
  });
  return true;
}

}  // namespace cuda_launch
}  // namespace poolx
