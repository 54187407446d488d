// Host-side argument checking shared by every backend: turns the arguments
// of an op into a validated Pool2dGeometry, with torch's error messages.
// `dims` is the number of spatial dimensions: 2 or 3.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <string>

#include "poolx/geometry.h"

namespace poolx {

struct PoolParams {
  at::IntArrayRef kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

// Checks the pooling parameters and the input (unbatched or batched), and
// returns the geometry of its planes or volumes. `op` names the calling op
// in messages.
Pool2dGeometry forward_geometry(const at::Tensor& input, const PoolParams& p, const char* op,
                                int dims);

// The same for ops that run on outputs: checks that `output` has the pooled
// size of an input of `input_size` ((H, W) or (D, H, W)).
Pool2dGeometry output_geometry(const at::Tensor& output, at::IntArrayRef input_size,
                               const PoolParams& p, const char* op, int dims);

// Checks that `output` is a batched or unbatched pooled tensor of `dims`
// spatial dims and input_size names as many positive sizes.
void check_pooled_and_input_size(const at::Tensor& output, at::IntArrayRef input_size,
                                 const char* op, int dims);

// torch's check of adaptive pooling's input and grad_output (named `name`):
// every dimension but the first (the batch, or an unbatched input's channels)
// has elements.
void check_nonempty(const at::Tensor& t, const char* name, const char* op);

// Adaptive max pooling (geometry.h's AxisT) of an input to output_size, with
// torch's checks and messages: each axis steps as windowed pooling does where
// its size divides evenly (and takes the windowed fast paths), else is
// adaptive. (adaptive_args.cpp)
Pool2dGeometry adaptive_forward_geometry(const at::Tensor& input, at::IntArrayRef output_size,
                                         const char* op, int dims);

// The same for ops that run on outputs, whose `output` has output_size.
Pool2dGeometry adaptive_output_geometry(const at::Tensor& output, at::IntArrayRef input_size,
                                        at::IntArrayRef output_size, const char* op, int dims);

// Checks that a tensor of shape leading + spatial has fewer than 2^63
// elements; `name` names the argument that gave the spatial sizes.
void check_numel_fits(at::IntArrayRef leading, at::IntArrayRef spatial, const char* name,
                      const char* op);

// (h, w), or (d, h, w) for 3 dims: one of g's per-axis values as a list.
c10::SmallVector<int64_t, 3> per_axis(int64_t d, int64_t h, int64_t w, int dims);

// "3x8x8" (or with another separator): sizes as torch's messages write them.
std::string joined(at::IntArrayRef sizes, const char* separator = "x");

// "3x3" or "2x2x2".
std::string window_name(const Pool2dGeometry& g);

// Argmax element type: uint8 for windows of up to 256 taps, int32 beyond.
at::ScalarType argmax_dtype(const Pool2dGeometry& g);

// Checks that argmax has the dtype, shape and device that matches `like`.
void check_argmax(const at::Tensor& argmax, const at::Tensor& like, const Pool2dGeometry& g,
                  const char* op);

// t with a batch dimension (unbatched input gains a batch of 1), contiguous
// in `format`.
at::Tensor as_batched(const at::Tensor& t, at::MemoryFormat format, int dims);

// What the kernels see of a batched tensor: a 5-D one as its 4-D view
// (N, C, D * H, W) (geometry.h), which both memory formats allow.
at::Tensor folded(const at::Tensor& t);

// How the kernels see a problem: its geometry, and a view of each batched
// tensor in `format`. Volumes whose windows are one slice deep and step one
// slice (video's 1x2x2) are 2-D pooling of their N * C * D planes (N * D
// channels_last images), which the 2-D fast paths take (not where the forward
// writes indices, which number the volume: pool_glue.h, kernels_cpu.cpp);
// other volumes are folded (folded()), as every batched image is itself.
struct KernelView {
  Pool2dGeometry g;
  at::MemoryFormat format;
  bool slices_as_planes;

  at::Tensor operator()(const at::Tensor& batched) const;
};
KernelView kernel_view(const Pool2dGeometry& g, at::MemoryFormat format);

// The memory format in which poolx lays out a tensor and its results: a
// batched tensor's suggested one; an unbatched one's contiguous, but in
// windowed 3-D pooling that of the batch of one torch makes of it.
at::MemoryFormat pool_memory_format(const at::Tensor& t, int dims, bool adaptive = false);

}  // namespace poolx
