// Host-side checks of adaptive max pooling: its arguments as a geometry.
#include <c10/util/Exception.h>
#include <c10/util/safe_numerics.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "pool_args.h"

namespace poolx {
namespace {

// One axis pooled from `in` to `out`: windowed where out divides in (also
// out == 0, which pools nothing), else adaptive (stride 0).
void set_axis(int64_t in, int64_t out, int64_t* in_f, int64_t* out_f, int64_t* kernel,
              int64_t* stride) {
  *in_f = in;
  *out_f = out;
  const bool even = out == 0 || in % out == 0;
  *kernel = adaptive_kernel(in, out);
  *stride = even ? *kernel : 0;
}

Pool2dGeometry adaptive_geometry(at::IntArrayRef in, at::IntArrayRef out, const char* op) {
  const size_t dims = in.size();
  TORCH_CHECK(out.size() == dims, op, "(): internal error: output_size.size() must be ", dims);
  for (const int64_t o : out) {
    TORCH_CHECK(o >= 0, op, ": output_size must be non-negative, but got output_size=", out);
  }
  // Keeps o * in (geometry.h) far from int64 overflow.
  constexpr int64_t kMaxSize = int64_t(1) << 31;
  for (size_t i = 0; i < dims; ++i) {
    TORCH_CHECK(in[i] < kMaxSize && out[i] < kMaxSize, op,
                "(): input and output sizes must be below 2^31, but got input size ", in,
                " and output_size=", out);
  }
  Pool2dGeometry g{};
  g.pad_h = g.pad_w = 0;
  g.dilation_h = g.dilation_w = 1;
  if (dims == 3) set_axis(in[0], out[0], &g.in_d, &g.out_d, &g.kernel_d, &g.stride_d);
  set_axis(in[dims - 2], out[dims - 2], &g.in_h, &g.out_h, &g.kernel_h, &g.stride_h);
  set_axis(in[dims - 1], out[dims - 1], &g.in_w, &g.out_w, &g.kernel_w, &g.stride_w);
  // The widest argmax is int32; a larger window would wrap its tap positions.
  int64_t taps = 0;
  // (kernel_h * kernel_w < 2^62: each is at most 2^31)
  const bool huge = c10::mul_overflows(g.kernel_h * g.kernel_w, g.kernel_d, &taps);
  TORCH_CHECK(!huge && taps <= std::numeric_limits<int32_t>::max(), op,
              "(): windows of more than 2^31 - 1 elements are not supported, but pooling an "
              "input of size ", in, " to output_size=", out, " makes windows of up to ",
              window_name(g), " elements");
  return g;
}

}  // namespace

void check_nonempty(const at::Tensor& t, const char* name, const char* op) {
  for (int64_t i = 1; i < t.dim(); ++i) {
    TORCH_CHECK(t.size(i) > 0, op, "(): Expected ", name, " to have non-zero size for non-batch "
                "dimensions, but ", name, " has sizes ", t.sizes(), " with dimension ", i,
                " being empty");
  }
}

Pool2dGeometry adaptive_forward_geometry(const at::Tensor& input, at::IntArrayRef output_size,
                                         const char* op, int dims) {
  const int64_t ndim = input.dim();
  TORCH_CHECK(ndim == dims + 1 || ndim == dims + 2, op, "(): Expected ", dims + 1, "D or ",
              dims + 2, "D tensor, but got: ", input.sizes());
  check_nonempty(input, "input", op);
  for (const int64_t o : output_size) {
    if (o >= 0) continue;
    // torch's words, from allocating the output
    std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end() - dims);
    shape.insert(shape.end(), output_size.begin(), output_size.end());
    TORCH_CHECK(false, "Trying to create tensor with negative dimension ", o, ": ",
                at::IntArrayRef(shape));
  }
  return adaptive_geometry(input.sizes().slice(ndim - dims), output_size, op);
}

Pool2dGeometry adaptive_output_geometry(const at::Tensor& output, at::IntArrayRef input_size,
                                        at::IntArrayRef output_size, const char* op, int dims) {
  check_pooled_and_input_size(output, input_size, op, dims);
  check_numel_fits(output.sizes().slice(0, output.dim() - dims), input_size, "input_size", op);
  TORCH_CHECK(output.sizes().slice(output.dim() - dims) == output_size, op, ": output_size=",
              output_size, " must be the pooled tensor's, but the given tensor has size ",
              output.sizes());
  return adaptive_geometry(input_size, output_size, op);
}

}  // namespace poolx
