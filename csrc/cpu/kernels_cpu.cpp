// CPU kernels: the fast paths where they apply, else parallel loops over the
// element functors that the CUDA kernels run too (poolx/element_ops.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "../kernels.h"
#include "../tensor_layout.h"
#include "fast_paths.h"
#include "parallel_elements.h"
#include "poolx/element_ops.h"

namespace poolx {
namespace {

using at::Tensor;

#define POOLX_DISPATCH_POOLED_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, TYPE, NAME, __VA_ARGS__)
#define POOLX_DISPATCH_GRAD_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, TYPE, NAME, __VA_ARGS__)

void forward(const Tensor& input, const Tensor& values, const Tensor& argmax,
             const Pool2dGeometry& g) {
  if (fast_forward(input, values, argmax, g)) return;
  const Layout4d in_l = layout_of(input), out_l = layout_of(values);
  const at::ScalarType am_type = argmax.defined() ? argmax.scalar_type() : at::kByte;
  POOLX_DISPATCH_POOLED_TYPES(input.scalar_type(), "poolx_max_pool2d_cpu", [&] {
    dispatch_argmax_type(am_type, [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      const scalar_t* in = input.const_data_ptr<scalar_t>();
      scalar_t* out = values.mutable_data_ptr<scalar_t>();
      argmax_t* am = argmax.defined() ? argmax.mutable_data_ptr<argmax_t>() : nullptr;
      parallel_for_each_element(out_l, ForwardElem<scalar_t, argmax_t>{in, out, am, in_l, g});
    });
  });
}

void backward(const Tensor& grad_output, const Tensor& argmax, const Tensor& grad_input,
              const Pool2dGeometry& g) {
  if (fast_backward(grad_output, argmax, grad_input, g)) return;
  const Layout4d out_l = layout_of(grad_output), in_l = layout_of(grad_input);
  POOLX_DISPATCH_GRAD_TYPES(grad_output.scalar_type(), "poolx_max_pool2d_backward_cpu", [&] {
    dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
      const argmax_t* am = argmax.const_data_ptr<argmax_t>();
      scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
      // sums in the element type, as torch's CPU kernels add into the gradient
      parallel_for_each_element(
          in_l, BackwardElem<scalar_t, argmax_t, /*sum_t=*/scalar_t>{go, am, gi, out_l, g});
    });
  });
}

void argmax_to_indices(const Tensor& argmax, const Tensor& indices, const Pool2dGeometry& g) {
  dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
    using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
    const argmax_t* am = argmax.const_data_ptr<argmax_t>();
    int64_t* idx = indices.mutable_data_ptr<int64_t>();
    parallel_for_each_element(layout_of(argmax), IndexElem<argmax_t>{am, idx, g});
  });
}

void gather_by_argmax(const Tensor& src, const Tensor& argmax, const Tensor& out,
                      const Pool2dGeometry& g) {
  const Layout4d src_l = layout_of(src);
  POOLX_DISPATCH_GRAD_TYPES(src.scalar_type(), "poolx_gather_by_argmax_cpu", [&] {
    dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      const scalar_t* s = src.const_data_ptr<scalar_t>();
      const argmax_t* am = argmax.const_data_ptr<argmax_t>();
      scalar_t* o_ptr = out.mutable_data_ptr<scalar_t>();
      parallel_for_each_element(layout_of(out),
                                GatherElem<scalar_t, argmax_t>{s, am, o_ptr, src_l, g});
    });
  });
}

void argmax_to_mask(const Tensor& argmax, const Tensor& mask, const Pool2dGeometry& g) {
  const Layout4d out_l = layout_of(argmax);
  dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
    using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
    const argmax_t* am = argmax.const_data_ptr<argmax_t>();
    bool* m = mask.mutable_data_ptr<bool>();
    parallel_for_each_element(layout_of(mask), MaskElem<argmax_t>{am, m, out_l, g});
  });
}

void max_unpool2d_argmax(const Tensor& values, const Tensor& argmax, const Tensor& out,
                         const Pool2dGeometry& g) {
  if (fast_unpool_argmax(values, argmax, out, g)) return;
  const Layout4d val_l = layout_of(values);
  POOLX_DISPATCH_POOLED_TYPES(values.scalar_type(), "poolx_max_unpool2d_argmax_cpu", [&] {
    dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      const scalar_t* v = values.const_data_ptr<scalar_t>();
      const argmax_t* am = argmax.const_data_ptr<argmax_t>();
      scalar_t* o_ptr = out.mutable_data_ptr<scalar_t>();
      parallel_for_each_element(layout_of(out),
                                UnpoolArgmaxElem<scalar_t, argmax_t>{v, am, o_ptr, val_l, g});
    });
  });
}

// Scatter by flat index, one plane per task and in input order within a
// plane, so that the last write wins deterministically (torch's CPU rule).
void max_unpool2d_indices(const Tensor& values, const Tensor& indices, const Tensor& out) {
  const Layout4d in_l = layout_of(values), out_l = layout_of(out);
  POOLX_DISPATCH_POOLED_TYPES(values.scalar_type(), "poolx_max_unpool2d_cpu", [&] {
    const scalar_t* v = values.const_data_ptr<scalar_t>();
    const int64_t* idx = indices.const_data_ptr<int64_t>();
    scalar_t* o_ptr = out.mutable_data_ptr<scalar_t>();
    const PlaneStrides is = in_l.plane_strides(), os = out_l.plane_strides();
    at::parallel_for(0, in_l.n * in_l.c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t n = p / in_l.c, c = p % in_l.c;
        scalar_t* o_plane = o_ptr + out_l.plane_offset(n, c);
        for (int64_t h = 0; h < out_l.h; ++h) {
          for (int64_t w = 0; w < out_l.w; ++w) o_plane[h * os.h + w * os.w] = scalar_t(0);
        }
        const int64_t in_plane = in_l.plane_offset(n, c);
        for (int64_t h = 0; h < in_l.h; ++h) {
          for (int64_t w = 0; w < in_l.w; ++w) {
            const int64_t i = in_plane + h * is.h + w * is.w;
            const int64_t target = idx[i];
            o_plane[(target / out_l.w) * os.h + (target % out_l.w) * os.w] = v[i];
          }
        }
      }
    });
  });
}

}  // namespace

const Pool2dKernels& cpu_kernels() {
  static const Pool2dKernels kernels{forward,          backward,       argmax_to_indices,
                                     gather_by_argmax, argmax_to_mask, max_unpool2d_argmax,
                                     max_unpool2d_indices};
  return kernels;
}

}  // namespace poolx
