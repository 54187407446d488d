#include "pool_args.h"

#include <c10/util/Exception.h>
#include <c10/util/safe_numerics.h>

#include <cstdint>
#include <limits>
#include <string>

namespace poolx {
namespace {

int64_t pick(at::IntArrayRef v, int i) { return v.size() == 1 ? v[0] : v[i]; }

// The checks below run in the order of torch's max_pool2d (its meta function,
// then pooling_output_shape per dimension, then pool2d_shape_check), with its
// messages, so that every call torch rejects fails here with torch's message.

// "two" or "three": torch's words for the lengths of the argument lists.
const char* count_word(int dims) { return dims == 3 ? "three" : "two"; }

// kernel_size, stride, padding and dilation per axis (depth of unit for
// 2-D); nothing checked but their lengths.
Pool2dGeometry window_params(const PoolParams& p, const char* op, int dims) {
  const auto fits = [&](at::IntArrayRef v) { return v.size() == 1 || v.size() == size_t(dims); };
  const char* n = count_word(dims);
  TORCH_CHECK(fits(p.kernel_size), op, ": kernel_size must either be a single int, or a tuple "
              "of ", n, " ints, but got kernel_size=", p.kernel_size);
  TORCH_CHECK(p.stride.empty() || fits(p.stride), op, ": stride must either be omitted, a "
              "single int, or a tuple of ", n, " ints, but got stride=", p.stride);
  TORCH_CHECK(fits(p.padding), op, ": padding must either be a single int, or a tuple of ", n,
              " ints, but got padding=", p.padding);
  TORCH_CHECK(fits(p.dilation), op, ": dilation must be either a single int, or a tuple of ", n,
              " ints, but got dilation=", p.dilation);
  const at::IntArrayRef stride = p.stride.empty() ? p.kernel_size : p.stride;
  // axis i of 0 (depth), 1 (height), 2 (width)
  const auto at = [&](at::IntArrayRef v, int i) { return pick(v, i - (3 - dims)); };
  Pool2dGeometry g{};
  if (dims == 3) {
    g.kernel_d = at(p.kernel_size, 0);
    g.stride_d = at(stride, 0);
    g.pad_d = at(p.padding, 0);
    g.dilation_d = at(p.dilation, 0);
  }
  g.kernel_h = at(p.kernel_size, 1);
  g.kernel_w = at(p.kernel_size, 2);
  g.stride_h = at(stride, 1);
  g.stride_w = at(stride, 2);
  g.pad_h = at(p.padding, 1);
  g.pad_w = at(p.padding, 2);
  g.dilation_h = at(p.dilation, 1);
  g.dilation_w = at(p.dilation, 2);
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
void check_dim_params(const Pool2dGeometry& g, int dims, int64_t kernel, int64_t stride,
                      int64_t pad, int64_t dilation) {
  TORCH_CHECK(stride != 0, "stride should not be zero, but got ",
              dims == 3 ? "dT: " + std::to_string(g.stride_d) + " " : "", "dH: ", g.stride_h,
              " dW: ", g.stride_w);
  TORCH_CHECK(pad >= 0, "pad must be non-negative, but got pad: ", pad);
  TORCH_CHECK(pad_within_half_effective_kernel(pad, kernel, dilation),
              "pad should be at most half of effective kernel size, but got pad=", pad,
              ", kernel_size=", kernel, " and dilation=", dilation);
}

// "kT: 2 " for 3-D pooling, nothing for 2-D: the depth in torch's messages.
std::string depth_part(int dims, const char* name, int64_t value) {
  return dims == 3 ? std::string(name) + ": " + std::to_string(value) + " " : std::string();
}

// The parameter checks of pooling_output_shape (depth, height, then width)
// and of pool2d_shape_check or pool3d_shape_check before it looks at the input.
void check_window_values(const Pool2dGeometry& g, int dims) {
  if (dims == 3) check_dim_params(g, dims, g.kernel_d, g.stride_d, g.pad_d, g.dilation_d);
  check_dim_params(g, dims, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h);
  check_dim_params(g, dims, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w);
  TORCH_CHECK(g.kernel_d > 0 && g.kernel_h > 0 && g.kernel_w > 0,
              "kernel size should be greater than zero, but got ",
              depth_part(dims, "kT", g.kernel_d), "kH: ", g.kernel_h, " kW: ", g.kernel_w);
  TORCH_CHECK(g.stride_d > 0 && g.stride_h > 0 && g.stride_w > 0,
              "stride should be greater than zero, but got ", depth_part(dims, "dT", g.stride_d),
              "dH: ", g.stride_h, " dW: ", g.stride_w);
  TORCH_CHECK(g.dilation_d > 0 && g.dilation_h > 0 && g.dilation_w > 0,
              "dilation should be greater than zero, but got ",
              depth_part(dims, "dilationT", g.dilation_d), "dilationH: ", g.dilation_h,
              " dilationW: ", g.dilation_w);
}

// pool2d_shape_check's (pool3d_shape_check's) last parameter check, then
// poolx's own limits, then the output size. `in` is (H, W) or (D, H, W).
void finish_geometry(Pool2dGeometry& g, at::IntArrayRef in, const PoolParams& p,
                     const char* op) {
  const int dims = static_cast<int>(in.size());
  const bool pads_fit =
      g.kernel_d / 2 >= g.pad_d && g.kernel_w / 2 >= g.pad_w && g.kernel_h / 2 >= g.pad_h;
  if (dims == 3) {
    TORCH_CHECK(pads_fit, "pad should be smaller than or equal to half of kernel size, but got kT: ",
                g.kernel_d, " kW: ", g.kernel_w, " kH: ", g.kernel_h, " padT: ", g.pad_d,
                " padW: ", g.pad_w, " padH: ", g.pad_h);
  } else {
    TORCH_CHECK(pads_fit,
                "pad should be smaller than or equal to half of kernel size, but got padW = ",
                g.pad_w, ", padH = ", g.pad_h, ", kW = ", g.kernel_w, ", kH = ", g.kernel_h);
  }
  // Bounds that keep every index product far from int64 overflow.
  constexpr int64_t kMaxExtent = int64_t(1) << 31;
  for (const int64_t v : {g.kernel_d, g.kernel_h, g.kernel_w, g.stride_d, g.stride_h,
                          g.stride_w, g.dilation_d, g.dilation_h, g.dilation_w}) {
    TORCH_CHECK(v < kMaxExtent, op, ": kernel_size, stride and dilation must be below 2^31, "
                "but got kernel_size=", p.kernel_size, ", stride=", p.stride, ", dilation=",
                p.dilation);
  }
  // The widest argmax is int32; a larger window would wrap its tap positions.
  int64_t taps = 0;
  const bool huge = c10::mul_overflows(g.kernel_h * g.kernel_w, g.kernel_d, &taps);
  TORCH_CHECK(!huge && taps <= std::numeric_limits<int32_t>::max(), op,
              ": windows of more than 2^31 - 1 elements are not supported, but got kernel_size=",
              p.kernel_size);
  // Keeps in + 2 * pad, and the output size arithmetic, far from int64 overflow.
  constexpr int64_t kMaxSize = int64_t(1) << 62;
  for (const int64_t v : in) {
    TORCH_CHECK(v <= kMaxSize, op, ": the input's sizes must be at most 2^62, but got ", in);
  }
  if (dims == 3) {
    g.in_d = in[0];
    g.out_d = pool_output_size(g.in_d, g.kernel_d, g.stride_d, g.pad_d, g.dilation_d,
                               p.ceil_mode);
  }
  g.in_h = in[dims - 2];
  g.in_w = in[dims - 1];
  g.out_h = pool_output_size(g.in_h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h, p.ceil_mode);
  g.out_w = pool_output_size(g.in_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w, p.ceil_mode);
}

}  // namespace

Pool2dGeometry forward_geometry(const at::Tensor& input, const PoolParams& p, const char* op,
                                int dims) {
  Pool2dGeometry g = window_params(p, op, dims);
  const int64_t ndim = input.dim();
  if (dims == 3) {
    TORCH_CHECK(ndim == 4 || ndim == 5,
                "non-empty 4D or 5D (batch mode) tensor expected for input, but got input of "
                "shape ", input.sizes());
  } else {
    TORCH_CHECK(ndim == 3 || ndim == 4,
                "non-empty 3D or 4D (batch mode) tensor expected for input, but got input of "
                "shape ", input.sizes());
  }
  check_window_values(g, dims);
  for (int64_t d = ndim - dims - 1; d < ndim; ++d) {
    if (dims == 3) {
      TORCH_CHECK(input.size(d) > 0, op, ": Expected input's non-batch dimensions to have "
                  "positive length, but got input of shape ", input.sizes());
    }
    TORCH_CHECK(input.size(d) > 0,
                "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
                "but got:", input.sizes());
  }
  finish_geometry(g, input.sizes().slice(ndim - dims), p, op);
  TORCH_CHECK(g.out_d >= 1 && g.out_h >= 1 && g.out_w >= 1, "Given input size: (",
              joined(input.sizes().slice(ndim - dims - 1)), "). Calculated output size: (",
              input.size(-dims - 1), "x", joined(per_axis(g.out_d, g.out_h, g.out_w, dims)),
              "). Output size is too small");
  return g;
}

void check_pooled_and_input_size(const at::Tensor& output, at::IntArrayRef input_size,
                                 const char* op, int dims) {
  TORCH_CHECK(output.dim() == dims + 1 || output.dim() == dims + 2, op, ": expected a ",
              dims + 1, "D or ", dims + 2, "D pooled tensor, but got shape ", output.sizes());
  TORCH_CHECK(input_size.size() == size_t(dims), op, ": input_size must name the input's ",
              dims == 3 ? "(D, H, W)" : "(H, W)", ", but got ", input_size);
  for (const int64_t v : input_size) {
    TORCH_CHECK(v > 0, op, ": input_size must be positive, but got ", input_size);
  }
}

Pool2dGeometry output_geometry(const at::Tensor& output, at::IntArrayRef input_size,
                               const PoolParams& p, const char* op, int dims) {
  check_pooled_and_input_size(output, input_size, op, dims);
  Pool2dGeometry g = window_params(p, op, dims);
  check_window_values(g, dims);
  finish_geometry(g, input_size, p, op);
  check_numel_fits(output.sizes().slice(0, output.dim() - dims), input_size, "input_size", op);
  const auto out = per_axis(g.out_d, g.out_h, g.out_w, dims);
  TORCH_CHECK(output.sizes().slice(output.dim() - dims) == at::IntArrayRef(out), op,
              ": pooling an input of size ", input_size, " gives an output of size (",
              joined(out, ", "), "), but the given tensor has size ", output.sizes());
  return g;
}

void check_numel_fits(at::IntArrayRef leading, at::IntArrayRef spatial, const char* name,
                      const char* op) {
  int64_t numel = 1;
  bool overflows = false;
  for (const int64_t s : spatial) overflows = c10::mul_overflows(numel, s, &numel) || overflows;
  for (const int64_t s : leading) overflows = c10::mul_overflows(numel, s, &numel) || overflows;
  TORCH_CHECK(!overflows, op, ": ", name, "=", spatial, " is too large: a tensor of shape ",
              leading, " + ", spatial, " would have more than 2^63 - 1 elements");
}

c10::SmallVector<int64_t, 3> per_axis(int64_t d, int64_t h, int64_t w, int dims) {
  c10::SmallVector<int64_t, 3> out;
  if (dims == 3) out.push_back(d);
  out.push_back(h);
  out.push_back(w);
  return out;
}

std::string joined(at::IntArrayRef sizes, const char* separator) {
  std::string out;
  for (const int64_t s : sizes) out += (out.empty() ? "" : separator) + std::to_string(s);
  return out;
}

std::string window_name(const Pool2dGeometry& g) {
  return joined(per_axis(g.kernel_d, g.kernel_h, g.kernel_w, g.planar() ? 2 : 3));
}

at::ScalarType argmax_dtype(const Pool2dGeometry& g) {
  return g.window_size() <= 256 ? at::kByte : at::kInt;
}

void check_argmax(const at::Tensor& argmax, const at::Tensor& like, const Pool2dGeometry& g,
                  const char* op) {
  TORCH_CHECK(argmax.scalar_type() == argmax_dtype(g), op, ": argmax must have dtype ",
              argmax_dtype(g), " for a ", window_name(g), " window, but got argmax.dtype=",
              argmax.scalar_type());
  TORCH_CHECK(argmax.sizes() == like.sizes(), op, ": argmax must have the shape ",
              like.sizes(), " of the pooled tensor, but got argmax.shape=", argmax.sizes());
  TORCH_CHECK(argmax.device() == like.device(), op,
              ": argmax must be on the device of the pooled tensor (", like.device(),
              "), but got argmax.device=", argmax.device());
}

at::Tensor as_batched(const at::Tensor& t, at::MemoryFormat format, int dims) {
  const at::Tensor batched = t.dim() == dims + 1 ? t.unsqueeze(0) : t;
  return batched.contiguous(format);
}

at::Tensor folded(const at::Tensor& t) { return t.dim() == 5 ? t.flatten(2, 3) : t; }

KernelView kernel_view(const Pool2dGeometry& g, at::MemoryFormat format) {
  if (g.planar() || g.kernel_d != 1 || g.stride_d != 1) return {g, format, false};
  Pool2dGeometry planes = g;  // out_d == in_d: every slice pools on its own
  planes.in_d = planes.out_d = 1;
  planes.dilation_d = 1;
  return {planes, format, true};
}

at::Tensor KernelView::operator()(const at::Tensor& batched) const {
  if (!batched.defined() || !slices_as_planes) return batched.defined() ? folded(batched) : batched;
  // (N, C, D, H, W) as (N, C * D, H, W), or in channels_last_3d as the
  // channels_last (N * D, C, H, W): views, for the strides allow them
  return format == at::MemoryFormat::ChannelsLast3d ? batched.transpose(1, 2).flatten(0, 1)
                                                    : batched.flatten(1, 2);
}

at::MemoryFormat pool_memory_format(const at::Tensor& t, int dims, bool adaptive) {
  if (dims == 3 && !adaptive && t.dim() == dims + 1) {
    // torch's rule: channels_last_3d where only that layout fits the batch
    const at::Tensor batch = t.unsqueeze(0);
    return !batch.is_contiguous() && batch.is_contiguous(at::MemoryFormat::ChannelsLast3d)
               ? at::MemoryFormat::ChannelsLast3d
               : at::MemoryFormat::Contiguous;
  }
  return t.dim() == dims + 2 ? t.suggest_memory_format() : at::MemoryFormat::Contiguous;
}

}  // namespace poolx
