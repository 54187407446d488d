// CUDA forward: value (+ argmax, + index) per output. The generic kernel runs the
// shared element function per output; with a 1-byte argmax, channels_last
// tensors (any geometry) and tiled NCHW ones take vectorized kernels when
// shapes and pointers are aligned for them.
#include <type_traits>

#include "channels_last.cuh"
#include "cuda_common.cuh"
#include "launchers.h"
#include "poolx/element_ops.h"

namespace poolx {
namespace cuda_launch {
namespace {

// Tiled NCHW, kernel width 2: a thread pools V adjacent outputs of one row,
// reading 2 * V contiguous inputs per kernel row. Requires no partial window
// (out_h * kernel_h <= in_h, 2 * out_w <= in_w) and out_w % V == 0.
template <typename scalar_t, int V, bool kWithArgmax>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    max_pool2d_tiled_nchw_forward_kernel(const scalar_t* __restrict__ input,
                                         scalar_t* __restrict__ values,
                                         uint8_t* __restrict__ argmax,
                                         int64_t* __restrict__ indices, int64_t planes,
                                         Pool2dGeometry g) {
  using A = acc_t<scalar_t>;
  constexpr int kW = 2;
  for_each_row_group<V>(planes, g, [&](int64_t out_row, int64_t ow0) {
    const int64_t plane = div_nonneg(out_row, g.out_h);
    const int64_t ih0 = (out_row - plane * g.out_h) * g.kernel_h;
    const scalar_t* src = input + (plane * g.in_h + ih0) * g.in_w + ow0 * kW;
    A best[V];
    uint8_t arg[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      best[i] = lowest_value<A>();
      arg[i] = 0;  // the first tap, as the element function reports for an all -inf window
    }
#pragma unroll 2
    for (int kh = 0; kh < g.kernel_h; ++kh, src += g.in_w) {
      scalar_t row[V * kW];
      load_vectors<V * kW>(src, row);
#pragma unroll
      for (int i = 0; i < V; ++i) {
#pragma unroll
        for (int kw = 0; kw < kW; ++kw) {
          const A v = static_cast<A>(row[i * kW + kw]);
          if (replaces_max(v, best[i])) {
            best[i] = v;
            arg[i] = static_cast<uint8_t>(kh * kW + kw);
          }
        }
      }
    }
    scalar_t out[V];
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = static_cast<scalar_t>(best[i]);
    const int64_t o = out_row * g.out_w + ow0;
    store_vectors<V>(values + o, out);
    if (kWithArgmax) store_vectors<V>(argmax + o, arg);
    if (kWithArgmax && indices != nullptr) {
      const int64_t oh = out_row - plane * g.out_h;
#pragma unroll
      for (int i = 0; i < V; ++i) indices[o + i] = argmax_to_index_elem(arg[i], g, oh, ow0 + i);
    }
  });
}

template <typename scalar_t, int V>
bool nchw_vector_fits(const scalar_t* input, const scalar_t* values, const uint8_t* argmax,
                      const Pool2dGeometry& g) {
  constexpr int load = chunk_bytes<scalar_t, 2 * V>();
  return g.out_w % V == 0 && (g.in_w * sizeof(scalar_t)) % load == 0 && aligned(input, load) &&
         aligned(values, V * sizeof(scalar_t)) && (argmax == nullptr || aligned(argmax, V));
}

template <typename scalar_t, int V>
cudaError_t launch_tiled_nchw(const scalar_t* input, scalar_t* values, uint8_t* argmax,
                              int64_t* indices, const Layout4d& in_l, const Pool2dGeometry& g,
                              cudaStream_t stream) {
  const int64_t work = in_l.n * in_l.c * g.out_h * (g.out_w / V);
  return argmax != nullptr
             ? launch(max_pool2d_tiled_nchw_forward_kernel<scalar_t, V, true>, work, stream,
                      input, values, argmax, indices, in_l.n * in_l.c, g)
             : launch(max_pool2d_tiled_nchw_forward_kernel<scalar_t, V, false>, work, stream,
                      input, values, argmax, indices, in_l.n * in_l.c, g);
}

// Launches a tiled fast path if one applies; returns false if none does.
template <typename scalar_t>
bool try_tiled_forward(const scalar_t* input, scalar_t* values, uint8_t* argmax,
                       int64_t* indices, const Layout4d& in_l, const Layout4d& out_l,
                       const Pool2dGeometry& g, cudaStream_t stream, cudaError_t* err) {
  if (!is_tiled(g) || in_l.channels_last || out_l.channels_last) return false;
  constexpr int V = 16 / sizeof(scalar_t);
  if (g.kernel_w != 2 || g.out_h * g.kernel_h > g.in_h || g.out_w * 2 > g.in_w) return false;
  if (nchw_vector_fits<scalar_t, V>(input, values, argmax, g)) {
    *err = launch_tiled_nchw<scalar_t, V>(input, values, argmax, indices, in_l, g, stream);
    return true;
  }
  if (nchw_vector_fits<scalar_t, V / 2>(input, values, argmax, g)) {
    *err = launch_tiled_nchw<scalar_t, V / 2>(input, values, argmax, indices, in_l, g, stream);
    return true;
  }
  return false;
}

template <typename T>
constexpr bool kHasTiledPath = std::is_floating_point<T>::value ||
                               std::is_same<T, c10::Half>::value ||
                               std::is_same<T, c10::BFloat16>::value;

}  // namespace

template <typename scalar_t, typename argmax_t>
cudaError_t max_pool2d_forward(const scalar_t* input, scalar_t* values, argmax_t* argmax,
                               int64_t* indices, const Layout4d& in_l, const Layout4d& out_l,
                               const Pool2dGeometry& g, cudaStream_t stream) {
  if constexpr (kHasTiledPath<scalar_t> && std::is_same<argmax_t, uint8_t>::value) {
    cudaError_t err = cudaSuccess;
    if (try_cl_forward(input, values, argmax, indices, in_l, out_l, g, stream, &err) ||
        try_tiled_forward(input, values, argmax, indices, in_l, out_l, g, stream, &err)) {
      return err;
    }
  }
  return launch_for_each_element(
      out_l, ForwardElem<scalar_t, argmax_t>{input, values, argmax, in_l, g, indices},
      index_width(in_l, out_l, g), stream);
}

#define POOLX_INSTANTIATE_FORWARD(T)                                                          \
  template cudaError_t max_pool2d_forward<T, uint8_t>(const T*, T*, uint8_t*, int64_t*,       \
                                                      const Layout4d&, const Layout4d&,        \
                                                      const Pool2dGeometry&, cudaStream_t);    \
  template cudaError_t max_pool2d_forward<T, int32_t>(const T*, T*, int32_t*, int64_t*,       \
                                                      const Layout4d&, const Layout4d&,        \
                                                      const Pool2dGeometry&, cudaStream_t);
POOLX_CUDA_POOLED_TYPES(POOLX_INSTANTIATE_FORWARD)

}  // namespace cuda_launch
}  // namespace poolx
