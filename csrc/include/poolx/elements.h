// One function per output (or input) element for every poolx kernel. The CPU
// and CUDA launchers both call these, so CPU tests check the CUDA index logic.
//
// A plane is addressed by two element strides, so the same function serves
// NCHW (stride_w == 1) and channels_last (stride_w == channels).
#pragma once

#include <cstdint>

#include "poolx/geometry.h"
#include "poolx/max_rule.h"

namespace poolx {

// I: the index type (geometry.h).
template <typename I>
struct PlaneStridesT {
  I h, w;
};
using PlaneStrides = PlaneStridesT<int64_t>;

template <typename A, typename I>
struct MaxAndArgmax {
  A value;
  I argmax;  // kh * kernel_w + kw inside the window
};

// Forward: max over the in-bounds taps of window (oh, ow) and the tap that
// holds it. A window with no in-bounds tap (dilation + padding) yields the
// initial max and the first tap position, which lies outside the plane.
template <typename scalar_t, typename I>
POOLX_HD MaxAndArgmax<acc_t<scalar_t>, I> max_pool2d_forward_elem(
    const scalar_t* plane, PlaneStridesT<I> s, const Pool2dGeometryT<I>& g, Same<I> oh,
    Same<I> ow) {
  using A = acc_t<scalar_t>;
  const I h0 = oh * g.stride_h - g.pad_h;
  const I w0 = ow * g.stride_w - g.pad_w;
  const TapRangeT<I> rows = window_taps(h0, g.kernel_h, g.dilation_h, g.in_h);
  const TapRangeT<I> cols = window_taps(w0, g.kernel_w, g.dilation_w, g.in_w);
  MaxAndArgmax<A, I> best{lowest_value<A>(), rows.begin * g.kernel_w + cols.begin};
  for (I kh = rows.begin; kh < rows.end; ++kh) {
    const scalar_t* row = plane + (h0 + kh * g.dilation_h) * s.h;
    for (I kw = cols.begin; kw < cols.end; ++kw) {
      const A v = static_cast<A>(row[(w0 + kw * g.dilation_w) * s.w]);
      if (replaces_max(v, best.value)) {
        best.value = v;
        best.argmax = kh * g.kernel_w + kw;
      }
    }
  }
  return best;
}

// Input coordinates of tap `argmax` of window (oh, ow); may lie outside the
// plane only for a window with no in-bounds tap.
template <typename I>
struct InputPos {
  I h, w;
  POOLX_HD bool inside(const Pool2dGeometryT<I>& g) const {
    return h >= 0 && h < g.in_h && w >= 0 && w < g.in_w;
  }
};

template <typename I>
POOLX_HD InputPos<I> decode_argmax(Same<I> argmax, const Pool2dGeometryT<I>& g, Same<I> oh,
                                   Same<I> ow) {
  const I kh = div_nonneg(argmax, g.kernel_w);
  const I kw = argmax - kh * g.kernel_w;
  return {oh * g.stride_h - g.pad_h + kh * g.dilation_h,
          ow * g.stride_w - g.pad_w + kw * g.dilation_w};
}

// Whether `argmax` names a tap of window (oh, ow) that lies inside the input:
// the only values the forward writes, and the only ones the kernels may index
// memory with. A window with no in-bounds tap (dilation + padding) accepts any
// tap, as every path bounds-checks the taps of such windows.
template <typename I>
POOLX_HD bool argmax_is_valid(Same<I> argmax, const Pool2dGeometryT<I>& g, Same<I> oh,
                              Same<I> ow) {
  if (argmax < 0 || argmax >= g.kernel_h * g.kernel_w) return false;
  const I h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
  const TapRangeT<I> rows = window_taps(h0, g.kernel_h, g.dilation_h, g.in_h);
  const TapRangeT<I> cols = window_taps(w0, g.kernel_w, g.dilation_w, g.in_w);
  if (rows.begin >= rows.end || cols.begin >= cols.end) return true;
  const I kh = div_nonneg(argmax, g.kernel_w);
  const I kw = argmax - kh * g.kernel_w;
  return kh >= rows.begin && kh < rows.end && kw >= cols.begin && kw < cols.end;
}

// torch's flat index h * in_w + w of the selected tap, clamped into the plane
// so that an empty window never yields an out-of-range index.
template <typename I>
POOLX_HD I argmax_to_index_elem(Same<I> argmax, const Pool2dGeometryT<I>& g, Same<I> oh,
                                Same<I> ow) {
  InputPos<I> p = decode_argmax(argmax, g, oh, ow);
  p.h = p.h < 0 ? 0 : (p.h >= g.in_h ? g.in_h - 1 : p.h);
  p.w = p.w < 0 ? 0 : (p.w >= g.in_w ? g.in_w - 1 : p.w);
  return p.h * g.in_w + p.w;
}

// Visits, in row-major output order, every window whose argmax selects input
// (ih, iw), passing its offset in the output plane; from window (from_oh,
// from_ow) on where given (the windows after one, for unpool's scatter). This
// order is the order in which PyTorch's scatter adds gradients, so sums agree
// bit for bit.
template <typename argmax_t, typename I, typename Visit>
POOLX_HD void for_each_window_selecting(const argmax_t* argmax_plane, PlaneStridesT<I> s,
                                        const Pool2dGeometryT<I>& g, Same<I> ih, Same<I> iw,
                                        Visit&& visit, Same<I> from_oh = 0, Same<I> from_ow = 0) {
  const TapRangeT<I> ohs =
      windows_covering(ih, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h, g.out_h);
  const TapRangeT<I> ows =
      windows_covering(iw, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w, g.out_w);
  for (I oh = ohs.begin > from_oh ? ohs.begin : from_oh; oh < ohs.end; ++oh) {
    const I kh = tap_of(ih, oh, g.stride_h, g.pad_h, g.dilation_h);
    if (kh < 0) continue;
    for (I ow = oh == from_oh && from_ow > ows.begin ? from_ow : ows.begin; ow < ows.end; ++ow) {
      const I kw = tap_of(iw, ow, g.stride_w, g.pad_w, g.dilation_w);
      if (kw < 0) continue;
      const I offset = oh * s.h + ow * s.w;
      if (static_cast<I>(argmax_plane[offset]) == kh * g.kernel_w + kw) visit(offset);
    }
  }
}

// Backward: gradient of input (ih, iw) = sum of grad_output over the windows
// that selected it, in output order, starting from +0 as torch's zero-filled
// buffer does. Between adds the sum is a sum_t, as in torch: the element type
// on CPU (torch's CPU kernels add into the bfloat16/half gradient, rounding
// after every add), acc_t on CUDA (float, rounded once by the caller).
template <typename sum_t, typename scalar_t, typename argmax_t, typename I>
POOLX_HD sum_t max_pool2d_backward_elem(const scalar_t* grad_out_plane,
                                        const argmax_t* argmax_plane, PlaneStridesT<I> s,
                                        const Pool2dGeometryT<I>& g, Same<I> ih, Same<I> iw) {
  using A = acc_t<scalar_t>;
  sum_t sum = static_cast<sum_t>(A(0));
  for_each_window_selecting(argmax_plane, s, g, ih, iw, [&](I o) {
    sum = static_cast<sum_t>(static_cast<A>(sum) + static_cast<A>(grad_out_plane[o]));
  });
  return sum;
}

// Unpool by argmax: the value of the last window (in output order) that
// selected input (ih, iw), else 0; torch's CPU unpool lets the last write win.
template <typename scalar_t, typename argmax_t, typename I>
POOLX_HD scalar_t max_unpool2d_argmax_elem(const scalar_t* values_plane,
                                           const argmax_t* argmax_plane, PlaneStridesT<I> s,
                                           const Pool2dGeometryT<I>& g, Same<I> ih, Same<I> iw) {
  scalar_t out = scalar_t(0);
  for_each_window_selecting(argmax_plane, s, g, ih, iw, [&](I o) { out = values_plane[o]; });
  return out;
}

// Double backward: grad_output's gradient is grad_input's gradient gathered
// at each window's selected tap (0 for a window with no in-bounds tap).
template <typename scalar_t, typename I>
POOLX_HD scalar_t gather_by_argmax_elem(const scalar_t* src_plane, PlaneStridesT<I> src_s,
                                        Same<I> argmax, const Pool2dGeometryT<I>& g, Same<I> oh,
                                        Same<I> ow) {
  const InputPos<I> p = decode_argmax(argmax, g, oh, ow);
  return p.inside(g) ? src_plane[p.h * src_s.h + p.w * src_s.w] : scalar_t(0);
}

}  // namespace poolx
