// The glue of max_unpool2d: values placed at torch's int64 indices, which
// need no window (also serving max_unpool1d and max_unpool3d, on views).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "kernels.h"
#include "op_common.h"
#include "pool_args.h"

namespace poolx {
namespace op_common {

using at::IntArrayRef;

template <const Pool2dKernels& (*K)()>
Tensor max_unpool2d(const Tensor& input, const Tensor& indices, IntArrayRef output_size) {
  const char* op = "max_unpool2d";
  // torch's checks in torch's order, so that a call torch rejects fails with the same type.
  TORCH_CHECK(indices.scalar_type() == at::kLong, op,
              ": elements in indices should be type int64 but got: ", indices.scalar_type());
  TORCH_CHECK(output_size.size() == 2, op,
              ": output_size must have exactly two elements (H, W), but got output_size=",
              output_size);
  TORCH_CHECK(input.dim() == 3 || input.dim() == 4, op,
              ": Expected 3d or 4d tensor for input, but got input of shape ", input.sizes());
  TORCH_CHECK(input.sizes() == indices.sizes(), op,
              ": Expected shape of indices to be same as that of the input tensor (",
              input.sizes(), ") but got indices tensor with shape: ", indices.sizes());
  for (int64_t d = 1; d < input.dim(); ++d) {
    TORCH_CHECK(input.size(d) > 0, op,
                ": Expected input to have non-zero size for non-batch dimensions, but got ",
                input.sizes());
  }
  // An empty output plane is allowed, as in torch, which then places nothing
  // and checks no index.
  TORCH_CHECK(output_size[0] >= 0 && output_size[1] >= 0, op,
              ": output_size must be non-negative, but got output_size=", output_size);
  check_pool_dtype(input, "input", op, /*allow_integral=*/true);
  TORCH_CHECK(input.device() == indices.device(), op,
              ": indices must be on the device of input (", input.device(),
              "), but got indices.device=", indices.device());
  check_numel_fits(input.sizes().slice(0, input.dim() - 2), output_size, "output_size", op);
  // Each index is checked where it is placed: the CPU kernel raises torch's
  // error, the CUDA kernel asserts on the device (as torch's does).
  const at::MemoryFormat format = pool_memory_format(input, 2);
  const Tensor in4 = as_batched(input, format, 2);
  const Tensor idx4 = as_batched(indices, format, 2);
  const Tensor out = at::empty({in4.size(0), in4.size(1), output_size[0], output_size[1]},
                                  layout_of(in4, format));
  if (in4.numel() > 0 && out.numel() > 0) K().max_unpool2d_indices(in4, idx4, out);
  return unbatch_like(out, input, 2);
}

}  // namespace op_common
}  // namespace poolx
