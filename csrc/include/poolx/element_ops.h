// The per-element bodies of the generic kernels, as functors that both
// launchers run unchanged: the CPU's parallel_for_each_element and the CUDA
// for_each_element_kernel call op(n, c, h, w, offset) for every element of
// the tensor they write, so the CPU tests exercise the very code CUDA runs.
#pragma once

#include <cstdint>

#include "poolx/elements.h"
#include "poolx/layout.h"

namespace poolx {

// Per output: max, and argmax and index where those are asked for.
template <typename scalar_t, typename argmax_t>
struct ForwardElem {
  const scalar_t* input;
  scalar_t* values;
  argmax_t* argmax;
  Layout4d in_l;
  Pool2dGeometry g;
  int64_t* indices = nullptr;  // torch's flat indices too (return_indices)

  POOLX_HD void operator()(int64_t n, int64_t c, int64_t oh, int64_t ow, int64_t o) const {
    const auto best =
        max_pool2d_forward_elem(input + in_l.plane_offset(n, c), in_l.plane_strides(), g, oh, ow);
    values[o] = static_cast<scalar_t>(best.value);
    if (argmax != nullptr) argmax[o] = static_cast<argmax_t>(best.argmax);
    if (indices != nullptr) indices[o] = argmax_to_index_elem(best.argmax, g, oh, ow);
  }
};

// Per input: the gradient gathered from the windows that selected it, summed
// in sum_t (see max_pool2d_backward_elem).
template <typename scalar_t, typename argmax_t, typename sum_t>
struct BackwardElem {
  const scalar_t* grad_output;
  const argmax_t* argmax;
  scalar_t* grad_input;
  Layout4d out_l;
  Pool2dGeometry g;

  POOLX_HD void operator()(int64_t n, int64_t c, int64_t ih, int64_t iw, int64_t i) const {
    const int64_t plane = out_l.plane_offset(n, c);
    grad_input[i] = static_cast<scalar_t>(max_pool2d_backward_elem<sum_t>(
        grad_output + plane, argmax + plane, out_l.plane_strides(), g, ih, iw));
  }
};

// Per output: torch's int64 index of the selected tap.
template <typename argmax_t>
struct IndexElem {
  const argmax_t* argmax;
  int64_t* indices;
  Pool2dGeometry g;

  POOLX_HD void operator()(int64_t, int64_t, int64_t oh, int64_t ow, int64_t o) const {
    indices[o] = argmax_to_index_elem(static_cast<int64_t>(argmax[o]), g, oh, ow);
  }
};

// Per output: the source element at the selected tap (double backward).
template <typename scalar_t, typename argmax_t>
struct GatherElem {
  const scalar_t* src;
  const argmax_t* argmax;
  scalar_t* out;
  Layout4d src_l;
  Pool2dGeometry g;

  POOLX_HD void operator()(int64_t n, int64_t c, int64_t oh, int64_t ow, int64_t o) const {
    out[o] = gather_by_argmax_elem(src + src_l.plane_offset(n, c), src_l.plane_strides(),
                                   static_cast<int64_t>(argmax[o]), g, oh, ow);
  }
};

// Per input: whether any window selected it.
template <typename argmax_t>
struct MaskElem {
  const argmax_t* argmax;
  bool* mask;
  Layout4d argmax_l;
  Pool2dGeometry g;

  POOLX_HD void operator()(int64_t n, int64_t c, int64_t ih, int64_t iw, int64_t i) const {
    mask[i] = argmax_mask_elem(argmax + argmax_l.plane_offset(n, c), argmax_l.plane_strides(),
                               g, ih, iw);
  }
};

// Per input: the value of the last window that selected it, else 0.
template <typename scalar_t, typename argmax_t>
struct UnpoolArgmaxElem {
  const scalar_t* values;
  const argmax_t* argmax;
  scalar_t* out;
  Layout4d values_l;
  Pool2dGeometry g;

  POOLX_HD void operator()(int64_t n, int64_t c, int64_t ih, int64_t iw, int64_t i) const {
    const int64_t plane = values_l.plane_offset(n, c);
    out[i] = max_unpool2d_argmax_elem(values + plane, argmax + plane, values_l.plane_strides(), g,
                                      ih, iw);
  }
};

}  // namespace poolx
