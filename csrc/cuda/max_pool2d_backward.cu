// CUDA backward (grad_input from grad_output and the argmax) and unpool by
// argmax, which routes values the same way. The generic
// kernel gathers per input element with the shared element function (no
// atomics, torch's summation order); tiled geometries with a 1-byte argmax
// take a one-pass vectorized path that writes every grad_input element:
// grad_output where the window's argmax selects the element, else +0.
#include <c10/macros/Macros.h>

#include <type_traits>

#include "cuda_common.cuh"
#include "launchers.h"
#include "poolx/element_ops.h"

namespace poolx {
namespace cuda_launch {
namespace {

// What a tiled kernel writes where a window's argmax selects an input. The
// backward sums one term into +0, as the element function (and torch's
// zero-filled buffer) does, so -0.0 becomes +0.0; unpool (kCopy) copies it.
template <bool kCopy, typename scalar_t>
__device__ __forceinline__ scalar_t routed(scalar_t v) {
  if constexpr (kCopy) {
    return v;
  } else {
    using A = acc_t<scalar_t>;
    return static_cast<scalar_t>(A(0) + static_cast<A>(v));
  }
}

// Tiled NCHW, kernel width 2: a thread reads V adjacent outputs of one row and
// writes their 2 * V inputs per kernel row. Requires exact tiling
// (out_h * kernel_h == in_h, 2 * out_w == in_w) and out_w % V == 0.
template <typename scalar_t, int V, bool kCopy>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    max_pool2d_tiled_nchw_backward_kernel(const scalar_t* __restrict__ grad_output,
                                          const uint8_t* __restrict__ argmax,
                                          scalar_t* __restrict__ grad_input, int64_t planes,
                                          Pool2dGeometry g) {
  constexpr int kW = 2;
  const int64_t groups_per_row = g.out_w / V;
  const int64_t total = planes * g.out_h * groups_per_row;
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t out_row = div_nonneg(t, groups_per_row);  // plane * out_h + oh
    const int64_t ow0 = (t - out_row * groups_per_row) * V;
    const int64_t o = out_row * g.out_w + ow0;
    scalar_t grad[V];
    uint8_t arg[V];
    load_vectors<V>(grad_output + o, grad);
    load_vectors<V>(argmax + o, arg);
    int highest = 0;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      grad[i] = routed<kCopy>(grad[i]);
      highest = arg[i] > highest ? arg[i] : highest;
    }
    // The argmax is checked as it is routed (the generic path runs a check pass
    // first); with exact tiling every tap lies inside the input.
    CUDA_KERNEL_ASSERT(highest < g.kernel_h * kW &&
                       "poolx: an argmax value names no tap of its window inside the input");
    // Exact tiling: input row out_row * kernel_h + kh, column 2 * ow0 onward.
    scalar_t* dst = grad_input + out_row * g.kernel_h * g.in_w + ow0 * kW;
#pragma unroll 2
    for (int kh = 0; kh < g.kernel_h; ++kh, dst += g.in_w) {
      scalar_t row[V * kW];
#pragma unroll
      for (int i = 0; i < V; ++i) {
#pragma unroll
        for (int kw = 0; kw < kW; ++kw) {
          row[i * kW + kw] = arg[i] == kh * kW + kw ? grad[i] : scalar_t(0);
        }
      }
      store_vectors<V * kW>(dst, row);
    }
  }
}

// Tiled channels_last: a thread reads V adjacent channels of one output pixel
// and writes them to every in-bounds tap of its window. Requires that the
// windows cover the input (out_h * kernel_h >= in_h, out_w * kernel_w >= in_w)
// and C % V == 0; partial (ceil_mode) windows are fine.
template <typename scalar_t, bool kCopy>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    max_pool2d_tiled_cl_backward_kernel(const scalar_t* __restrict__ grad_output,
                                        const uint8_t* __restrict__ argmax,
                                        scalar_t* __restrict__ grad_input, Layout4d out_l,
                                        Layout4d in_l, Pool2dGeometry g) {
  constexpr int V = 16 / sizeof(scalar_t);
  const PlaneStrides s = in_l.plane_strides();
  const int64_t total = out_l.numel() / V;
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t o = t * V;
    const Layout4d::Coord p = out_l.coord(o);
    scalar_t grad[V];
    uint8_t arg[V];
    load_vectors<V>(grad_output + o, grad);
    load_vectors<V>(argmax + o, arg);
#pragma unroll
    for (int i = 0; i < V; ++i) grad[i] = routed<kCopy>(grad[i]);
    const int64_t h0 = p.h * g.stride_h, w0 = p.w * g.stride_w;
    const TapRange rows = window_taps(h0, g.kernel_h, 1, g.in_h);
    const TapRange cols = window_taps(w0, g.kernel_w, 1, g.in_w);
    scalar_t* plane = grad_input + in_l.plane_offset(p.n, p.c);
    unsigned routed_lanes = 0;  // a lane whose argmax names no tap inside the input routes nowhere
    for (int64_t kh = rows.begin; kh < rows.end; ++kh) {
#pragma unroll 1
      for (int64_t kw = cols.begin; kw < cols.end; ++kw) {
        const int64_t tap = kh * g.kernel_w + kw;
        scalar_t x[V];
#pragma unroll
        for (int i = 0; i < V; ++i) {
          x[i] = arg[i] == tap ? grad[i] : scalar_t(0);
          routed_lanes |= static_cast<unsigned>(arg[i] == tap) << i;
        }
        store_vectors<V>(plane + (h0 + kh) * s.h + (w0 + kw) * s.w, x);
      }
    }
    CUDA_KERNEL_ASSERT(routed_lanes == (1u << V) - 1 &&
                       "poolx: an argmax value names no tap of its window inside the input");
  }
}

template <typename scalar_t, int V>
bool nchw_vector_fits(const scalar_t* grad_output, const uint8_t* argmax,
                      const scalar_t* grad_input, const Pool2dGeometry& g) {
  return g.out_w % V == 0 && aligned(grad_output, V * sizeof(scalar_t)) && aligned(argmax, V) &&
         aligned(grad_input, chunk_bytes<scalar_t, 2 * V>());
}

// Launches a tiled fast path if one applies; returns false if none does.
template <bool kCopy, typename scalar_t>
bool try_tiled_route(const scalar_t* grad_output, const uint8_t* argmax, scalar_t* grad_input,
                        const Layout4d& out_l, const Layout4d& in_l, const Pool2dGeometry& g,
                        cudaStream_t stream, cudaError_t* err) {
  if (!is_tiled(g) || in_l.channels_last != out_l.channels_last) return false;
  constexpr int V = 16 / sizeof(scalar_t);
  if (in_l.channels_last) {
    if (in_l.c % V != 0 || g.out_h * g.kernel_h < g.in_h || g.out_w * g.kernel_w < g.in_w ||
        !aligned(grad_output, 16) || !aligned(argmax, V) || !aligned(grad_input, 16)) {
      return false;
    }
    *err = launch(max_pool2d_tiled_cl_backward_kernel<scalar_t, kCopy>, out_l.numel() / V, stream,
                  grad_output, argmax, grad_input, out_l, in_l, g);
    return true;
  }
  if (g.kernel_w != 2 || g.out_h * g.kernel_h != g.in_h || g.out_w * 2 != g.in_w) return false;
  const int64_t rows = out_l.n * out_l.c * g.out_h;
  if (nchw_vector_fits<scalar_t, V>(grad_output, argmax, grad_input, g)) {
    *err = launch(max_pool2d_tiled_nchw_backward_kernel<scalar_t, V, kCopy>, rows * (g.out_w / V),
                  stream, grad_output, argmax, grad_input, out_l.n * out_l.c, g);
    return true;
  }
  if (nchw_vector_fits<scalar_t, V / 2>(grad_output, argmax, grad_input, g)) {
    *err = launch(max_pool2d_tiled_nchw_backward_kernel<scalar_t, V / 2, kCopy>,
                  rows * (g.out_w / (V / 2)), stream, grad_output, argmax, grad_input,
                  out_l.n * out_l.c, g);
    return true;
  }
  return false;
}

}  // namespace

template <typename scalar_t, typename argmax_t>
cudaError_t max_pool2d_backward(const scalar_t* grad_output, const argmax_t* argmax,
                                scalar_t* grad_input, const Layout4d& out_l,
                                const Layout4d& in_l, const Pool2dGeometry& g,
                                cudaStream_t stream) {
  if constexpr (std::is_same<argmax_t, uint8_t>::value) {
    cudaError_t err = cudaSuccess;
    if (try_tiled_route</*kCopy=*/false>(grad_output, argmax, grad_input, out_l, in_l, g,
                                           stream, &err)) {
      return err;
    }
  }
  const cudaError_t err = check_argmax(argmax, out_l, g, stream);
  if (err != cudaSuccess) return err;
  return launch_for_each_element(
      in_l, BackwardElem<scalar_t, argmax_t, /*sum_t=*/acc_t<scalar_t>>{
                 grad_output, argmax, grad_input, out_l, g}, stream);
}

// Unpool by argmax: in a tiled geometry every input lies in at most one
// window, so "the last window that selected it" is the tiled backward's
// routing with the value copied.
template <typename scalar_t, typename argmax_t>
cudaError_t max_unpool2d_argmax(const scalar_t* values, const argmax_t* argmax, scalar_t* out,
                                const Layout4d& values_l, const Layout4d& out_l,
                                const Pool2dGeometry& g, cudaStream_t stream) {
  if constexpr (std::is_same<argmax_t, uint8_t>::value && !std::is_integral<scalar_t>::value) {
    cudaError_t err = cudaSuccess;
    if (try_tiled_route</*kCopy=*/true>(values, argmax, out, values_l, out_l, g, stream, &err)) {
      return err;
    }
  }
  const cudaError_t err = check_argmax(argmax, values_l, g, stream);
  if (err != cudaSuccess) return err;
  return launch_for_each_element(
      out_l, UnpoolArgmaxElem<scalar_t, argmax_t>{values, argmax, out, values_l, g}, stream);
}

#define POOLX_INSTANTIATE_UNPOOL_ARGMAX(T)                                                    \
  template cudaError_t max_unpool2d_argmax<T, uint8_t>(const T*, const uint8_t*, T*,          \
                                                       const Layout4d&, const Layout4d&,      \
                                                       const Pool2dGeometry&, cudaStream_t);  \
  template cudaError_t max_unpool2d_argmax<T, int32_t>(const T*, const int32_t*, T*,          \
                                                       const Layout4d&, const Layout4d&,      \
                                                       const Pool2dGeometry&, cudaStream_t);
POOLX_CUDA_POOLED_TYPES(POOLX_INSTANTIATE_UNPOOL_ARGMAX)

#define POOLX_INSTANTIATE_BACKWARD(T)                                                       \
  template cudaError_t max_pool2d_backward<T, uint8_t>(const T*, const uint8_t*, T*,         \
                                                       const Layout4d&, const Layout4d&,     \
                                                       const Pool2dGeometry&, cudaStream_t); \
  template cudaError_t max_pool2d_backward<T, int32_t>(const T*, const int32_t*, T*,         \
                                                       const Layout4d&, const Layout4d&,     \
                                                       const Pool2dGeometry&, cudaStream_t);
POOLX_CUDA_GRAD_TYPES(POOLX_INSTANTIATE_BACKWARD)

}  // namespace cuda_launch
}  // namespace poolx
