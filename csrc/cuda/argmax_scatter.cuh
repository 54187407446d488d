// The mask and unpool by argmax of windows that do not tile the input, as a
// scatter in either layout: one thread per window (output) writes its
// selected tap into a zeroed tensor, where a gather needs one thread per
// input, each walking every window that covers it. The result is the
// gather's: the mask writes the same true from every window, and in unpool
// only the last window that selects an input (output order, as torch's CPU
// unpool) writes it. Each window checks its own argmax: no check pass runs.
#pragma once

#include <c10/macros/Macros.h>

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
  const I oh_end =
      windows_covering(p.h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h, g.out_h).end;
  const TapRangeT<I> ows =
      windows_covering(p.w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w, g.out_w);
  for (I oh2 = oh; oh2 < oh_end; ++oh2) {
    const I kh = tap_of(p.h, oh2, g.stride_h, g.pad_h, g.dilation_h);
    if (kh < 0) continue;
    for (I ow2 = oh2 == oh ? ow + 1 : ows.begin; ow2 < ows.end; ++ow2) {
      const I kw = tap_of(p.w, ow2, g.stride_w, g.pad_w, g.dilation_w);
      if (kw >= 0 && static_cast<I>(argmax_plane[oh2 * s.h + ow2 * s.w]) == kh * g.kernel_w + kw) {
        return true;
      }
    }
  }
  return false;
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
    mask[l.plane_offset(n, c) + p.h * s.h + p.w * s.w] = true;
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
    out[ol.plane_offset(n, c) + p.h * s.h + p.w * s.w] = values[o];
  }
};

// Unpool's scatter pays for its zero fill and its look at later windows where
// windows are at most half the inputs; the mask scatters wherever it runs.
inline bool scatter_pays(const Layout4d& windows, const Layout4d& inputs) {
  return 2 * windows.numel() <= inputs.numel();
}

}  // namespace cuda_launch
}  // namespace poolx
