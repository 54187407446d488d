// Host entry points of the poolx CUDA kernels: raw pointers to tensors that
// are contiguous in their Layout4d, launched on `stream` on the current
// device. Each returns the launch status (cudaGetLastError after the launch).
// Defined and explicitly instantiated in the .cu files next to this header:
// pooled types (forward, unpool) are float, double, c10::Half, c10::BFloat16,
// uint8_t, int8_t, int16_t, int32_t, int64_t; gradient types the first four;
// argmax types uint8_t and int32_t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "poolx/geometry.h"
#include "poolx/layout.h"

namespace poolx {
namespace cuda_launch {

// argmax may be null: the value-only path; indices null unless
// return_indices (torch's flat indices, written in the same pass).
template <typename scalar_t, typename argmax_t>
cudaError_t max_pool2d_forward(const scalar_t* input, scalar_t* values, argmax_t* argmax,
                               int64_t* indices, const Layout4d& in_l, const Layout4d& out_l,
                               const Pool2dGeometry& g, cudaStream_t stream);

// max_pool2d_backward, max_unpool2d_argmax and argmax_to_mask check the
// argmax themselves (check_argmax below): the tiled kernels as they route it,
// the scatters each window's own, the gathers by a check pass first (or, in
// channels_last, as they read it); the other argmax launchers trust theirs.
template <typename scalar_t, typename argmax_t>
cudaError_t max_pool2d_backward(const scalar_t* grad_output, const argmax_t* argmax,
                                scalar_t* grad_input, const Layout4d& out_l,
                                const Layout4d& in_l, const Pool2dGeometry& g,
                                cudaStream_t stream);

template <typename argmax_t>
cudaError_t argmax_to_indices(const argmax_t* argmax, int64_t* indices, const Layout4d& out_l,
                              const Pool2dGeometry& g, cudaStream_t stream);

template <typename scalar_t, typename argmax_t>
cudaError_t gather_by_argmax(const scalar_t* src, const argmax_t* argmax, scalar_t* out,
                             const Layout4d& src_l, const Layout4d& out_l,
                             const Pool2dGeometry& g, cudaStream_t stream);

template <typename argmax_t>
cudaError_t argmax_to_mask(const argmax_t* argmax, bool* mask, const Layout4d& argmax_l,
                           const Layout4d& mask_l, const Pool2dGeometry& g,
                           cudaStream_t stream);

template <typename scalar_t, typename argmax_t>
cudaError_t max_unpool2d_argmax(const scalar_t* values, const argmax_t* argmax, scalar_t* out,
                                const Layout4d& values_l, const Layout4d& out_l,
                                const Pool2dGeometry& g, cudaStream_t stream);

// Device-side assert (as torch's for bad unpool indices) on the first argmax
// value that names no tap of its window inside the input.
template <typename argmax_t>
cudaError_t check_argmax(const argmax_t* argmax, const Layout4d& argmax_l, const Pool2dGeometry& g,
                         cudaStream_t stream);

// `scratch` holds max_unpool2d_indices_scratch_bytes (contents irrelevant;
// none where the plane scatter runs): per output position, 1 + the largest in-plane input position targeting it
// (a key as wide as the kernel's index type: 4 bytes wherever it indexes in 32
// bits), then a 4-byte flag: some index lies outside the window that tiling
// would give it.
int64_t max_unpool2d_indices_scratch_bytes(const Layout4d& values_l, const Layout4d& out_l);
template <typename scalar_t>
cudaError_t max_unpool2d_indices(const scalar_t* values, const int64_t* indices, scalar_t* out,
                                 void* scratch, const Layout4d& values_l, const Layout4d& out_l,
                                 cudaStream_t stream);

}  // namespace cuda_launch
}  // namespace poolx
