// The kernels one backend provides. Every tensor is 4-D and contiguous in the
// memory format of its kind (values, argmax and grad_output share a layout);
// outputs are allocated by the caller and every element is written.
//
// The kernels that take an argmax trust none of it: each returns false where
// a value names no tap of its window inside the input (argmax_is_valid),
// having written garbage but never out of bounds; the caller then raises,
// locating the value with first_invalid_argmax. CUDA kernels assert on the
// device instead, as torch's do for bad unpool indices.
#pragma once

#include <ATen/core/Tensor.h>

#include "poolx/geometry.h"

namespace poolx {

struct Pool2dKernels {
  // values, and argmax and int64 indices where defined, from input in one pass
  void (*forward)(const at::Tensor& input, const at::Tensor& values, const at::Tensor& argmax,
                  const at::Tensor& indices, const Pool2dGeometry& g);
  // grad_input from grad_output and argmax
  bool (*backward)(const at::Tensor& grad_output, const at::Tensor& argmax,
                   const at::Tensor& grad_input, const Pool2dGeometry& g);
  // int64 flat indices ((d * in_h + h) * in_w + w) from argmax; `check`
  // false for an argmax a forward just wrote, which needs no check
  bool (*argmax_to_indices)(const at::Tensor& argmax, const at::Tensor& indices,
                            const Pool2dGeometry& g, bool check);
  // out[window] = src[selected tap]: the double backward
  bool (*gather_by_argmax)(const at::Tensor& src, const at::Tensor& argmax, const at::Tensor& out,
                           const Pool2dGeometry& g);
  // bool map of the selected taps
  bool (*argmax_to_mask)(const at::Tensor& argmax, const at::Tensor& mask,
                         const Pool2dGeometry& g);
  // values placed at their selected taps, last window wins, zeros elsewhere
  bool (*max_unpool2d_argmax)(const at::Tensor& values, const at::Tensor& argmax,
                              const at::Tensor& out, const Pool2dGeometry& g);
  // values placed at int64 flat indices, last write wins; indices pre-checked
  void (*max_unpool2d_indices)(const at::Tensor& values, const at::Tensor& indices,
                               const at::Tensor& out);
  // memory offset of the first argmax value that names no tap of its window
  // inside the input, or -1
  int64_t (*first_invalid_argmax)(const at::Tensor& argmax, const Pool2dGeometry& g);
};

const Pool2dKernels& cpu_kernels();
// Raises a clear error in a build without CUDA kernels.
const Pool2dKernels& cuda_kernels();

}  // namespace poolx
