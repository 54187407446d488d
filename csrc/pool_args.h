// Host-side argument checking shared by every backend: turns the arguments
// of an op into a validated Pool2dGeometry, with torch's error messages.
#pragma once

#include <ATen/core/Tensor.h>

#include "poolx/geometry.h"

namespace poolx {

struct PoolParams {
  at::IntArrayRef kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

// Checks the pooling parameters and the (3-D or 4-D) input, and returns the
// geometry of its planes. `op` names the calling op in messages.
Pool2dGeometry forward_geometry(const at::Tensor& input, const PoolParams& p, const char* op);

// The same for ops that run on outputs: checks that `output` has the pooled
// plane size of an input plane of `input_hw`.
Pool2dGeometry output_geometry(const at::Tensor& output, at::IntArrayRef input_hw,
                               const PoolParams& p, const char* op);

// Checks that a tensor of shape leading + [h, w] has fewer than 2^63 elements;
// `name` names the argument that gave h and w.
void check_numel_fits(at::IntArrayRef leading, int64_t h, int64_t w, const char* name,
                      const char* op);

// Argmax element type: uint8 for windows of up to 256 taps, int32 beyond.
at::ScalarType argmax_dtype(const Pool2dGeometry& g);

// Checks that argmax has the dtype, shape and device that matches `like`.
void check_argmax(const at::Tensor& argmax, const at::Tensor& like, const Pool2dGeometry& g,
                  const char* op);

// A 4-D view (3-D input gains a batch of 1), contiguous in `format`.
at::Tensor as_batched(const at::Tensor& t, at::MemoryFormat format);

// The memory format in which poolx lays out a tensor and its results.
at::MemoryFormat pool_memory_format(const at::Tensor& t);

}  // namespace poolx
