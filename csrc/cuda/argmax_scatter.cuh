// The mask and unpool by argmax of windows that do not tile the input, as a
// scatter in either layout: one thread per window (output) writes its
// selected tap into a zeroed tensor, where a gather needs one thread per
// input, each walking every window that covers it. The result is the
// gather's: the mask writes the same true from every window, and in unpool
// only the last window that selects an input (output order, as torch's CPU
// unpool) writes it. Each window checks its own argmax: no check pass runs.
#pragma once

#include "cuda_common.cuh"
#include "poolx/elements.h"
#include "poolx/layout.h"

namespace poolx {
namespace cuda_launch {

// The input position that window (oh, ow) selects, or false where it writes
// nothing: an invalid argmax (device assert) or a window with no in-bounds tap.
template <typename argmax_t, typename I>
__device__ bool selected_input(const argmax_t* argmax, const Pool2dGeometryT<I>& g, I oh, I ow,
                               I o, InputPos<I>* p) {
  const I a = static_cast<I>(argmax[o]);
  const bool valid = argmax_is_valid(a, g, oh, ow);
  POOLX_ASSERT_ARGMAX(valid);
  if (!valid) return false;
  *p = decode_argmax(a, g, oh, ow);
  return p->inside(g);
}

// Whether a window after (oh, ow) in output order selects p, which (oh, ow)
// selects: only the later windows that cover p are read, none for a tap that
// no later window overlaps (any tap for stride >= kernel).
template <typename argmax_t, typename I>
__device__ bool later_window_selects(const argmax_t* argmax_plane, PlaneStridesT<I> s,
                                     const Pool2dGeometryT<I>& g, I oh, I ow, InputPos<I> p) {
  bool selects = false;
  for_each_window_selecting(argmax_plane, s, g, p.row(g), p.w, [&](I) { selects = true; }, oh,
                            ow + 1);
  return selects;
}

template <typename argmax_t>
struct MaskScatterElem {
  const argmax_t* argmax;
  bool* mask;
  Layout4d mask_l;
  Pool2dGeometry g;

  template <typename I>
  __device__ void operator()(I n, I c, I oh, I ow, I o) const {
    InputPos<I> p;
    if (!selected_input(argmax, g.as<I>(), oh, ow, o, &p)) return;
    const auto l = mask_l.as<I>();
    const PlaneStridesT<I> s = l.plane_strides();
    mask[l.plane_offset(n, c) + p.row(g.as<I>()) * s.h + p.w * s.w] = true;
  }
};

template <typename scalar_t, typename argmax_t>
struct UnpoolScatterElem {
  const scalar_t* values;
  const argmax_t* argmax;
  scalar_t* out;
  Layout4d values_l, out_l;
  Pool2dGeometry g;

  template <typename I>
  __device__ void operator()(I n, I c, I oh, I ow, I o) const {
    const auto gi = g.as<I>();
    InputPos<I> p;
    if (!selected_input(argmax, gi, oh, ow, o, &p)) return;
    const auto vl = values_l.as<I>(), ol = out_l.as<I>();
    if (later_window_selects(argmax + vl.plane_offset(n, c), vl.plane_strides(), gi, oh, ow, p)) {
      return;
    }
    const PlaneStridesT<I> s = ol.plane_strides();
    out[ol.plane_offset(n, c) + p.row(gi) * s.h + p.w * s.w] = values[o];
  }
};

// Unpool's scatter pays for its zero fill and its look at later windows where
// windows are at most half the inputs; the mask scatters wherever it runs.
inline bool scatter_pays(const Layout4d& windows, const Layout4d& inputs) {
  return 2 * windows.numel() <= inputs.numel();
}

}  // namespace cuda_launch
}  // namespace poolx
