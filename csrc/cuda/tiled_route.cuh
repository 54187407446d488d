// Tiled routing: where windows tile the input (kernel == stride, no padding or
// dilation), every input element lies in one window, so each is written once,
// in one pass, without a zero-fill or atomics: a value where its window
// selects it, else 0. The backward (the gradient summed into +0), unpool by
// argmax and by indices (the value copied) and the mask (true) are this one
// routing; where the selected tap comes from (Taps) and what a selected
// element gets (Route) are the kernels' parameters.
#pragma once

#include <c10/macros/Macros.h>

#include <initializer_list>
#include <type_traits>

#include "cuda_common.cuh"
#include "poolx/element_ops.h"

namespace poolx {
namespace cuda_launch {

// What a selected input element gets: the sum of one gradient into +0, as the
// element function (and torch's zero-filled buffer) computes it, so -0.0
// becomes +0.0; the value copied; or 1 (true, for the mask, with no source).
enum class Route { kSum, kCopy, kOne };

template <Route R, typename scalar_t>
__device__ __forceinline__ scalar_t routed(scalar_t v) {
  if constexpr (R == Route::kSum) {
    using A = acc_t<scalar_t>;
    return static_cast<scalar_t>(A(0) + static_cast<A>(v));
  } else {
    return v;
  }
}

template <Route R, int V, typename scalar_t>
__device__ __forceinline__ void load_routed(const scalar_t* __restrict__ src, int64_t o,
                                            scalar_t* out) {
  if constexpr (R == Route::kOne) {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = scalar_t(1);
  } else {
    load_vectors<V>(src + o, out);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = routed<R>(out[i]);
  }
}

// The 1-byte argmax: a bad value (no tap of its window inside the input)
// fires a device-side assert, as torch's unpool does for bad indices.
struct ArgmaxTaps {
  static constexpr int kBytes = 1;  // per tap read
  const uint8_t* argmax;

  const void* data() const { return argmax; }

  template <int V>
  __device__ __forceinline__ void load(int64_t o, int64_t, int64_t, int64_t, uint8_t* tap,
                                       const Pool2dGeometry&) const {
    load_vectors<V>(argmax + o, tap);
  }
  __device__ __forceinline__ void report(bool all_valid) const {
    POOLX_ASSERT_ARGMAX(all_valid);
  }
};

// torch's int64 flat indices, for unpool: an index outside its own window gets
// tap 255 (routed nowhere) and sets *outside, and the caller's general unpool
// then rewrites the whole output.
struct IndexTaps {
  static constexpr int kBytes = 8;
  const int64_t* indices;
  unsigned* outside;

  const void* data() const { return indices; }

  // Lane i is window (oh, ow0 + i * ow_step).
  template <int V>
  __device__ __forceinline__ void load(int64_t o, int64_t oh, int64_t ow0, int64_t ow_step,
                                       uint8_t* tap, const Pool2dGeometry& g) const {
    int64_t index[V];
    load_vectors<V>(indices + o, index);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      tap[i] = 255;
      if (index[i] >= 0 && index[i] < g.in_h * g.in_w) {
        const int64_t h = div_nonneg(index[i], g.in_w);
        const int64_t kh = h - oh * g.kernel_h;
        const int64_t kw = index[i] - h * g.in_w - (ow0 + i * ow_step) * g.kernel_w;
        if (kh >= 0 && kh < g.kernel_h && kw >= 0 && kw < g.kernel_w) {
          tap[i] = static_cast<uint8_t>(kh * g.kernel_w + kw);
        }
      }
    }
  }
  __device__ __forceinline__ void report(bool all_valid) const {
    if (!all_valid) *outside = 1;  // every writer stores the same value
  }
};

// NCHW, kernel width 2: a thread reads V adjacent windows of one row and
// writes their 2 * V inputs per kernel row. Requires exact tiling
// (out_h * kernel_h == in_h, 2 * out_w == in_w) and out_w % V == 0.
template <Route R, typename Taps, typename scalar_t, int V>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    tiled_nchw_route_kernel(const scalar_t* __restrict__ src, Taps taps,
                            scalar_t* __restrict__ dst, int64_t planes, Pool2dGeometry g) {
  constexpr int kW = 2;
  for_each_row_group<V>(planes, g, [&](int64_t out_row, int64_t ow0) {
    const int64_t o = out_row * g.out_w + ow0;
    scalar_t value[V];
    uint8_t tap[V];
    load_routed<R, V>(src, o, value);
    taps.template load<V>(o, out_row - div_nonneg(out_row, g.out_h) * g.out_h, ow0, 1, tap, g);
    int highest = 0;
#pragma unroll
    for (int i = 0; i < V; ++i) highest = tap[i] > highest ? tap[i] : highest;
    // with exact tiling every tap lies inside the input
    taps.report(highest < g.kernel_h * kW);
    // Exact tiling: input row out_row * kernel_h + kh, column 2 * ow0 onward.
    scalar_t* row_out = dst + out_row * g.kernel_h * g.in_w + ow0 * kW;
#pragma unroll 2
    for (int kh = 0; kh < g.kernel_h; ++kh, row_out += g.in_w) {
      scalar_t row[V * kW];
#pragma unroll
      for (int i = 0; i < V; ++i) {
#pragma unroll
        for (int kw = 0; kw < kW; ++kw) {
          row[i * kW + kw] = tap[i] == kh * kW + kw ? value[i] : scalar_t(0);
        }
      }
      store_vectors<V * kW>(row_out, row);
    }
  });
}

// channels_last: a thread reads V adjacent channels of one window and writes
// them to every in-bounds tap of it. Requires that the windows cover the
// input (out_h * kernel_h >= in_h, out_w * kernel_w >= in_w) and C % V == 0
// (V: 16 bytes' worth of channels, or 2);
// partial (ceil_mode) windows are fine.
template <Route R, typename Taps, typename scalar_t, int V>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    tiled_cl_route_kernel(const scalar_t* __restrict__ src, Taps taps, scalar_t* __restrict__ dst,
                          Layout4d out_l, Layout4d in_l, Pool2dGeometry g) {
  const PlaneStrides s = in_l.plane_strides();
  const int64_t total = out_l.numel() / V;
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t o = t * V;
    const Layout4d::Coord p = out_l.coord(o);
    scalar_t value[V];
    uint8_t tap[V];
    load_routed<R, V>(src, o, value);
    taps.template load<V>(o, p.h, p.w, 0, tap, g);
    const int64_t h0 = p.h * g.stride_h, w0 = p.w * g.stride_w;
    const TapRange rows = window_taps(h0, g.kernel_h, 1, g.in_h);
    const TapRange cols = window_taps(w0, g.kernel_w, 1, g.in_w);
    scalar_t* plane = dst + in_l.plane_offset(p.n, p.c);
    unsigned routed_lanes = 0;  // a lane whose tap lies outside the input routes nowhere
    for (int64_t kh = rows.begin; kh < rows.end; ++kh) {
#pragma unroll 1
      for (int64_t kw = cols.begin; kw < cols.end; ++kw) {
        const int64_t here = kh * g.kernel_w + kw;
        scalar_t x[V];
#pragma unroll
        for (int i = 0; i < V; ++i) {
          x[i] = tap[i] == here ? value[i] : scalar_t(0);
          routed_lanes |= static_cast<unsigned>(tap[i] == here) << i;
        }
        store_vectors<V>(plane + (h0 + kh) * s.h + (w0 + kw) * s.w, x);
      }
    }
    taps.report(routed_lanes == (1u << V) - 1);
  }
}

// Alignment that loads of v taps of tap_bytes each need (chunks of at most 16 bytes).
inline int tap_chunk_bytes(int v, int tap_bytes) { return std::min(v * tap_bytes, 16); }

// Channels per thread along C of channels_last tensors like `l`: 16 bytes'
// worth where C allows, else 2 (few channels), else 0; every pointer of
// `elements` (null ones pass) aligned for that many elements, `taps` for as
// many taps of tap_bytes each.
template <typename scalar_t>
int channel_lanes(const Layout4d& l, std::initializer_list<const void*> elements,
                  const void* taps, int tap_bytes) {
  for (int v : {static_cast<int>(16 / sizeof(scalar_t)), 2}) {
    bool fits = l.c % v == 0 && aligned(taps, tap_chunk_bytes(v, tap_bytes));
    const int vector_bytes = v * static_cast<int>(sizeof(scalar_t));
    for (const void* p : elements) fits = fits && aligned(p, vector_bytes);
    if (fits) return v;
  }
  return 0;
}

// f(std::integral_constant<int, lanes>{}) for lanes that channel_lanes chose.
template <typename scalar_t, typename F>
cudaError_t with_lanes(int lanes, F&& f) {
  constexpr int V = 16 / sizeof(scalar_t);
  return lanes == V ? f(std::integral_constant<int, V>{}) : f(std::integral_constant<int, 2>{});
}

// The lanes (windows or channels per thread) of the tiled routing from `src`
// (pooled-shaped; unused for kOne) to `dst` (input-shaped), or 0 where it does
// not apply. Windows must have fewer than 255 taps.
template <typename scalar_t, typename Taps>
int tiled_route_lanes(const scalar_t* src, const Taps& taps, const scalar_t* dst,
                      const Layout4d& out_l, const Layout4d& in_l, const Pool2dGeometry& g) {
  if (!is_tiled(g) || in_l.channels_last != out_l.channels_last ||
      g.kernel_h * g.kernel_w >= 255) {
    return 0;
  }
  constexpr int V = 16 / sizeof(scalar_t);
  if (in_l.channels_last) {
    if (g.out_h * g.kernel_h < g.in_h || g.out_w * g.kernel_w < g.in_w) return 0;
    return channel_lanes<scalar_t>(in_l, {src, dst}, taps.data(), Taps::kBytes);
  }
  if (g.kernel_w != 2 || g.out_h * g.kernel_h != g.in_h || g.out_w * 2 != g.in_w) return 0;
  for (int v = V; v >= 1 && v >= V / 2; v /= 2) {
    if (g.out_w % v == 0 && aligned(src, std::min<int>(v * sizeof(scalar_t), 16)) &&
        aligned(taps.data(), tap_chunk_bytes(v, Taps::kBytes)) &&
        aligned(dst, std::min<int>(2 * v * sizeof(scalar_t), 16))) {
      return v;
    }
  }
  return 0;
}

// Launches the tiled routing if it applies; returns false if it does not.
template <Route R, typename Taps, typename scalar_t>
bool try_tiled_route(const scalar_t* src, const Taps& taps, scalar_t* dst, const Layout4d& out_l,
                     const Layout4d& in_l, const Pool2dGeometry& g, cudaStream_t stream,
                     cudaError_t* err) {
  constexpr int V = 16 / sizeof(scalar_t);
  const int lanes = tiled_route_lanes(src, taps, dst, out_l, in_l, g);
  if (lanes == 0) return false;
  if (in_l.channels_last) {
    *err = with_lanes<scalar_t>(lanes, [&](auto v) {
      return launch(tiled_cl_route_kernel<R, Taps, scalar_t, decltype(v)::value>,
                    out_l.numel() / lanes, stream, src, taps, dst, out_l, in_l, g);
    });
    return true;
  }
  const int64_t planes = out_l.n * out_l.c, rows = planes * g.out_h;
  if (lanes == V) {
    *err = launch(tiled_nchw_route_kernel<R, Taps, scalar_t, V>, rows * (g.out_w / V), stream, src,
                  taps, dst, planes, g);
  } else if constexpr (V > 1) {
    *err = launch(tiled_nchw_route_kernel<R, Taps, scalar_t, V / 2>, rows * (g.out_w / (V / 2)),
                  stream, src, taps, dst, planes, g);
  }
  return true;
}

}  // namespace cuda_launch
}  // namespace poolx
