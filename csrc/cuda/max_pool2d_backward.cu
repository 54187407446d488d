// CUDA backward (grad_input from grad_output and the argmax) and unpool by
// argmax, which routes values the same way. With a 1-byte argmax, tiled
// geometries take the one-pass tiled routing (tiled_route.cuh) and other
// channels_last ones a gather of V channels per thread (channels_last.cuh);
// the generic kernel gathers per input element with the shared element
// function; unpool scatters per plane or per window where that is cheaper.
// No sum uses atomics; all sum in torch's order.
#include <type_traits>

#include "argmax_scatter.cuh"
#include "channels_last.cuh"
#include "cuda_common.cuh"
#include "launchers.h"
#include "plane_scatter.cuh"
#include "poolx/element_ops.h"
#include "tiled_route.cuh"

namespace poolx {
namespace cuda_launch {

template <typename scalar_t, typename argmax_t>
cudaError_t max_pool2d_backward(const scalar_t* grad_output, const argmax_t* argmax,
                                scalar_t* grad_input, const Layout4d& out_l,
                                const Layout4d& in_l, const Pool2dGeometry& g,
                                cudaStream_t stream) {
  if constexpr (std::is_same<argmax_t, uint8_t>::value) {
    cudaError_t err = cudaSuccess;
    if (try_tiled_route<Route::kSum>(grad_output, ArgmaxTaps{argmax}, grad_input, out_l, in_l,
                                     g, stream, &err) ||
        try_cl_gather<Route::kSum>(grad_output, argmax, grad_input, out_l, in_l, g, stream,
                                   &err)) {
      return err;
    }
  }
  const cudaError_t err = check_argmax(argmax, out_l, g, stream);
  if (err != cudaSuccess) return err;
  return launch_for_each_element(
      in_l, BackwardElem<scalar_t, argmax_t, /*sum_t=*/acc_t<scalar_t>>{
                 grad_output, argmax, grad_input, out_l, g},
      index_width(out_l, in_l, g), stream);
}

// Unpool by argmax: in a tiled geometry every input lies in at most one
// window, so "the last window that selected it" is the tiled backward's
// routing with the value copied; NCHW planes that fit a block's shared memory
// take the plane scatter (plane_scatter.cuh); elsewhere, where windows are at
// most half the inputs, a scatter per window (argmax_scatter.cuh); else a
// gather per input.
template <typename scalar_t, typename argmax_t>
cudaError_t max_unpool2d_argmax(const scalar_t* values, const argmax_t* argmax, scalar_t* out,
                                const Layout4d& values_l, const Layout4d& out_l,
                                const Pool2dGeometry& g, cudaStream_t stream) {
  constexpr bool kRoutes =
      std::is_same<argmax_t, uint8_t>::value && !std::is_integral<scalar_t>::value;
  cudaError_t err = cudaSuccess;
  if constexpr (kRoutes) {
    if (try_tiled_route<Route::kCopy>(values, ArgmaxTaps{argmax}, out, values_l, out_l, g,
                                      stream, &err)) {
      return err;
    }
  }
  const IndexWidth width = index_width(values_l, out_l, g);
  using B = Bits<scalar_t>;
  if (try_plane_scatter(ArgmaxClaims<argmax_t>{argmax, g.as<int32_t>()},
                        reinterpret_cast<const B*>(values), reinterpret_cast<B*>(out), values_l,
                        out_l, width, stream, &err)) {
    return err;
  }
  if (scatter_pays(values_l, out_l)) {
    err = cudaMemsetAsync(out, 0, out_l.numel() * sizeof(scalar_t), stream);
    if (err != cudaSuccess) return err;
    return launch_for_each_element(
        values_l, UnpoolScatterElem<scalar_t, argmax_t>{values, argmax, out, values_l, out_l, g},
        width, stream);
  }
  if constexpr (kRoutes) {
    if (try_cl_gather<Route::kCopy>(values, argmax, out, values_l, out_l, g, stream, &err)) {
      return err;
    }
  }
  err = check_argmax(argmax, values_l, g, stream);
  if (err != cudaSuccess) return err;
  return launch_for_each_element(
      out_l, UnpoolArgmaxElem<scalar_t, argmax_t>{values, argmax, out, values_l, g},
      width, stream);
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
