// The per-element bodies of the generic kernels, as functors that both
// launchers run unchanged: the CPU's parallel_for_each_element and the CUDA
// for_each_element_kernel call op(n, c, h, w, offset) for every element of
// the tensor they write, so the CPU tests exercise the very code CUDA runs.
// Their index type I is the launcher's: int64_t on the CPU, int32_t in CUDA
// kernels whose every index fits (cuda_common.cuh).
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

  template <typename I>
  POOLX_HD void operator()(I n, I c, I oh, I ow, I o) const {
    const auto l = in_l.as<I>();
    const auto gi = g.as<I>();
    const auto best = max_pool2d_forward_elem(input + l.plane_offset(n, c), l.plane_strides(),
                                              gi, oh, ow);
    values[o] = static_cast<scalar_t>(best.value);
    if (argmax != nullptr) argmax[o] = static_cast<argmax_t>(best.argmax);
    if (indices != nullptr) indices[o] = argmax_to_index_elem(best.argmax, gi, oh, ow);
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

  template <typename I>
  POOLX_HD void operator()(I n, I c, I ih, I iw, I i) const {
    const auto l = out_l.as<I>();
    const I plane = l.plane_offset(n, c);
    grad_input[i] = static_cast<scalar_t>(max_pool2d_backward_elem<sum_t>(
        grad_output + plane, argmax + plane, l.plane_strides(), g.as<I>(), ih, iw));
  }
};

// Per output: torch's int64 index of the selected tap.
template <typename argmax_t>
struct IndexElem {
  const argmax_t* argmax;
  int64_t* indices;
  Pool2dGeometry g;

  template <typename I>
  POOLX_HD void operator()(I, I, I oh, I ow, I o) const {
    indices[o] = argmax_to_index_elem(static_cast<I>(argmax[o]), g.as<I>(), oh, ow);
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

  template <typename I>
  POOLX_HD void operator()(I n, I c, I oh, I ow, I o) const {
    const auto l = src_l.as<I>();
    out[o] = gather_by_argmax_elem(src + l.plane_offset(n, c), l.plane_strides(),
                                   static_cast<I>(argmax[o]), g.as<I>(), oh, ow);
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

  template <typename I>
  POOLX_HD void operator()(I n, I c, I ih, I iw, I i) const {
    const auto l = values_l.as<I>();
    const I plane = l.plane_offset(n, c);
    out[i] = max_unpool2d_argmax_elem(values + plane, argmax + plane, l.plane_strides(),
                                      g.as<I>(), ih, iw);
  }
};

}  // namespace poolx
