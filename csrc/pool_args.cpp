#include "pool_args.h"

#include <c10/util/Exception.h>
#include <c10/util/safe_numerics.h>

#include <cstdint>
#include <limits>

namespace poolx {
namespace {

int64_t pick(at::IntArrayRef v, int i) { return v.size() == 1 ? v[0] : v[i]; }

// The checks below run in the order of torch's max_pool2d (its meta function,
// then pooling_output_shape per dimension, then pool2d_shape_check), with its
// messages, so that every call torch rejects fails here with torch's message.

// kernel_size, stride, padding and dilation as (h, w) pairs; nothing checked
// but their lengths.
Pool2dGeometry window_params(const PoolParams& p, const char* op) {
  TORCH_CHECK(p.kernel_size.size() == 1 || p.kernel_size.size() == 2, op,
              ": kernel_size must either be a single int, or a tuple of two ints, but got "
              "kernel_size=", p.kernel_size);
  TORCH_CHECK(p.stride.empty() || p.stride.size() == 1 || p.stride.size() == 2, op,
              ": stride must either be omitted, a single int, or a tuple of two ints, but got "
              "stride=", p.stride);
  TORCH_CHECK(p.padding.size() == 1 || p.padding.size() == 2, op,
              ": padding must either be a single int, or a tuple of two ints, but got padding=",
              p.padding);
  TORCH_CHECK(p.dilation.size() == 1 || p.dilation.size() == 2, op,
              ": dilation must be either a single int, or a tuple of two ints, but got "
              "dilation=", p.dilation);
  Pool2dGeometry g{};
  g.kernel_h = pick(p.kernel_size, 0);
  g.kernel_w = pick(p.kernel_size, 1);
  const at::IntArrayRef stride = p.stride.empty() ? p.kernel_size : p.stride;
  g.stride_h = pick(stride, 0);
  g.stride_w = pick(stride, 1);
  g.pad_h = pick(p.padding, 0);
  g.pad_w = pick(p.padding, 1);
  g.dilation_h = pick(p.dilation, 0);
  g.dilation_w = pick(p.dilation, 1);
  return g;
}

// pad <= ((kernel - 1) * dilation + 1) / 2, halved toward zero as C++
// divides, for any int64 factors (neither is checked yet) and pad >= 0:
// exact, on the magnitudes in uint64 where the product may overflow.
bool pad_within_half_effective_kernel(int64_t pad, int64_t kernel, int64_t dilation) {
  const auto magnitude = [](int64_t v) {
    return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  };
  // kernel - 1 as sign and magnitude (kernel = INT64_MIN leaves int64)
  const bool factor_negative = kernel < 1;
  const uint64_t factor = factor_negative ? magnitude(kernel) + 1 : static_cast<uint64_t>(kernel) - 1;
  uint64_t product = 0;  // |(kernel - 1) * dilation|
  const bool huge = c10::mul_overflows(factor, magnitude(dilation), &product);
  if (factor != 0 && dilation != 0 && factor_negative != (dilation < 0)) {
    // product < 0: (1 - |product|) / 2 is 0 for |product| <= 2, negative beyond
    return pad == 0 && !huge && product <= 2;
  }
  // product >= 0: (product + 1) / 2 >= pad  <=>  product >= 2 * pad - 1
  return pad == 0 || huge || product >= 2 * static_cast<uint64_t>(pad) - 1;
}

// torch's pooling_output_shape checks, for one dimension (its messages,
// with the values added).
void check_dim_params(const Pool2dGeometry& g, int64_t kernel, int64_t stride, int64_t pad,
                      int64_t dilation) {
  TORCH_CHECK(stride != 0, "stride should not be zero, but got dH: ", g.stride_h,
              " dW: ", g.stride_w);
  TORCH_CHECK(pad >= 0, "pad must be non-negative, but got pad: ", pad);
  TORCH_CHECK(pad_within_half_effective_kernel(pad, kernel, dilation),
              "pad should be at most half of effective kernel size, but got pad=", pad,
              ", kernel_size=", kernel, " and dilation=", dilation);
}

// The parameter checks of pooling_output_shape (height, then width) and of
// pool2d_shape_check before it looks at the input.
void check_window_values(const Pool2dGeometry& g) {
  check_dim_params(g, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h);
  check_dim_params(g, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w);
  TORCH_CHECK(g.kernel_h > 0 && g.kernel_w > 0,
              "kernel size should be greater than zero, but got kH: ", g.kernel_h,
              " kW: ", g.kernel_w);
  TORCH_CHECK(g.stride_h > 0 && g.stride_w > 0,
              "stride should be greater than zero, but got dH: ", g.stride_h, " dW: ", g.stride_w);
  TORCH_CHECK(g.dilation_h > 0 && g.dilation_w > 0,
              "dilation should be greater than zero, but got dilationH: ", g.dilation_h,
              " dilationW: ", g.dilation_w);
}

// pool2d_shape_check's last parameter check, then poolx's own limits, then
// the output size.
void finish_geometry(Pool2dGeometry& g, int64_t in_h, int64_t in_w, const PoolParams& p,
                     const char* op) {
  TORCH_CHECK(g.kernel_w / 2 >= g.pad_w && g.kernel_h / 2 >= g.pad_h,
              "pad should be smaller than or equal to half of kernel size, but got padW = ",
              g.pad_w, ", padH = ", g.pad_h, ", kW = ", g.kernel_w, ", kH = ", g.kernel_h);
  // Bounds that keep every index product far from int64 overflow.
  constexpr int64_t kMaxExtent = int64_t(1) << 31;
  TORCH_CHECK(g.kernel_h < kMaxExtent && g.kernel_w < kMaxExtent && g.stride_h < kMaxExtent &&
                  g.stride_w < kMaxExtent && g.dilation_h < kMaxExtent &&
                  g.dilation_w < kMaxExtent,
              op, ": kernel_size, stride and dilation must be below 2^31, but got kernel_size=",
              p.kernel_size, ", stride=", p.stride, ", dilation=", p.dilation);
  // The widest argmax is int32; a larger window would wrap its tap positions.
  TORCH_CHECK(g.kernel_h * g.kernel_w <= std::numeric_limits<int32_t>::max(), op,
              ": windows of more than 2^31 - 1 elements are not supported, but got kernel_size=",
              p.kernel_size);
  // Keeps in + 2 * pad, and the output size arithmetic, far from int64 overflow.
  constexpr int64_t kMaxSize = int64_t(1) << 62;
  TORCH_CHECK(in_h <= kMaxSize && in_w <= kMaxSize, op,
              ": the input's height and width must be at most 2^62, but got ", in_h, "x", in_w);
  g.in_h = in_h;
  g.in_w = in_w;
  g.out_h = pool_output_size(in_h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h, p.ceil_mode);
  g.out_w = pool_output_size(in_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w, p.ceil_mode);
}

}  // namespace

Pool2dGeometry forward_geometry(const at::Tensor& input, const PoolParams& p, const char* op) {
  Pool2dGeometry g = window_params(p, op);
  const int64_t ndim = input.dim();
  TORCH_CHECK(ndim == 3 || ndim == 4,
              "non-empty 3D or 4D (batch mode) tensor expected for input, but got input of shape ",
              input.sizes());
  check_window_values(g);
  for (int64_t d = ndim - 3; d < ndim; ++d) {
    TORCH_CHECK(input.size(d) > 0,
                "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
                "but got:",
                input.sizes());
  }
  finish_geometry(g, input.size(-2), input.size(-1), p, op);
  const int64_t nplane = input.size(-3);
  TORCH_CHECK(g.out_h >= 1 && g.out_w >= 1, "Given input size: (", nplane, "x", g.in_h, "x",
              g.in_w, "). Calculated output size: (", nplane, "x", g.out_h, "x", g.out_w,
              "). Output size is too small");
  return g;
}

Pool2dGeometry output_geometry(const at::Tensor& output, at::IntArrayRef input_hw,
                               const PoolParams& p, const char* op) {
  TORCH_CHECK(output.dim() == 3 || output.dim() == 4, op,
              ": expected a 3D or 4D pooled tensor, but got shape ", output.sizes());
  TORCH_CHECK(input_hw.size() == 2, op, ": input_size must name the input's (H, W), but got ",
              input_hw);
  TORCH_CHECK(input_hw[0] > 0 && input_hw[1] > 0, op,
              ": input_size must be positive, but got ", input_hw);
  Pool2dGeometry g = window_params(p, op);
  check_window_values(g);
  finish_geometry(g, input_hw[0], input_hw[1], p, op);
  check_numel_fits(output.sizes().slice(0, output.dim() - 2), g.in_h, g.in_w, "input_size", op);
  TORCH_CHECK(output.size(-2) == g.out_h && output.size(-1) == g.out_w, op,
              ": pooling an input of size ", input_hw, " gives an output of size (", g.out_h,
              ", ", g.out_w, "), but the given tensor has size ", output.sizes());
  return g;
}

void check_numel_fits(at::IntArrayRef leading, int64_t h, int64_t w, const char* name,
                      const char* op) {
  int64_t numel = 0;
  bool overflows = c10::mul_overflows(h, w, &numel);
  for (const int64_t s : leading) overflows = c10::mul_overflows(numel, s, &numel) || overflows;
  TORCH_CHECK(!overflows, op, ": ", name, "=[", h, ", ", w, "] is too large: a tensor of shape ",
              leading, " + [", h, ", ", w, "] would have more than 2^63 - 1 elements");
}

at::ScalarType argmax_dtype(const Pool2dGeometry& g) {
  return g.kernel_h * g.kernel_w <= 256 ? at::kByte : at::kInt;
}

void check_argmax(const at::Tensor& argmax, const at::Tensor& like, const Pool2dGeometry& g,
                  const char* op) {
  TORCH_CHECK(argmax.scalar_type() == argmax_dtype(g), op, ": argmax must have dtype ",
              argmax_dtype(g), " for a ", g.kernel_h, "x", g.kernel_w,
              " window, but got argmax.dtype=", argmax.scalar_type());
  TORCH_CHECK(argmax.sizes() == like.sizes(), op, ": argmax must have the shape ",
              like.sizes(), " of the pooled tensor, but got argmax.shape=", argmax.sizes());
  TORCH_CHECK(argmax.device() == like.device(), op,
              ": argmax must be on the device of the pooled tensor (", like.device(),
              "), but got argmax.device=", argmax.device());
}

at::Tensor as_batched(const at::Tensor& t, at::MemoryFormat format) {
  const at::Tensor t4 = t.dim() == 3 ? t.unsqueeze(0) : t;
  return t4.contiguous(format);
}

at::MemoryFormat pool_memory_format(const at::Tensor& t) {
  return t.dim() == 4 ? t.suggest_memory_format() : at::MemoryFormat::Contiguous;
}

}  // namespace poolx
