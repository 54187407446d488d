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
  I argmax;  // (kd * kernel_h + kh) * kernel_w + kw inside the window
};

// A row of a (N, C, D * H, W) view of a volume (geometry.h): depth slice and
// row within it.
template <typename I>
struct SliceRow {
  I d, h;
};

template <typename I>
POOLX_HD SliceRow<I> split_row(I row, Same<I> rows_per_slice, Same<I> slices) {
  if (slices == 1) return {0, row};
  const I d = div_nonneg(row, rows_per_slice);
  return {d, row - d * rows_per_slice};
}

// The in-bounds taps of window (od, oh, ow) along each axis, and where it
// starts in the input.
template <typename I>
struct WindowTaps {
  I d0, h0, w0;
  TapRangeT<I> depths, rows, cols;

  POOLX_HD WindowTaps(const Pool2dGeometryT<I>& g, SliceRow<I> o, I ow)
      : d0(g.axis_d().start(o.d)), h0(g.axis_h().start(o.h)), w0(g.axis_w().start(ow)),
        // planes skip the depth's divisions: these run per element
        depths(g.planar() ? TapRangeT<I>{0, 1} : g.axis_d().taps(o.d, d0)),
        rows(g.axis_h().taps(o.h, h0)), cols(g.axis_w().taps(ow, w0)) {}

  POOLX_HD bool empty() const {
    return depths.begin >= depths.end || rows.begin >= rows.end || cols.begin >= cols.end;
  }
};

// Forward: max over the in-bounds taps of window (oh, ow) (oh a row of the
// depth-folded view) and the tap that holds it. A window with no in-bounds
// tap (dilation + padding) yields the initial max and the first tap
// position, which lies outside the input.
template <typename scalar_t, typename I>
POOLX_HD MaxAndArgmax<acc_t<scalar_t>, I> max_pool2d_forward_elem(
    const scalar_t* plane, PlaneStridesT<I> s, const Pool2dGeometryT<I>& g, Same<I> oh,
    Same<I> ow) {
  using A = acc_t<scalar_t>;
  const WindowTaps<I> t(g, split_row(oh, g.out_h, g.out_d), ow);
  MaxAndArgmax<A, I> best{lowest_value<A>(),
                          (t.depths.begin * g.kernel_h + t.rows.begin) * g.kernel_w +
                              t.cols.begin};
  for (I kd = t.depths.begin; kd < t.depths.end; ++kd) {
    const scalar_t* slice = plane + (t.d0 + kd * g.dilation_d) * g.in_h * s.h;
    for (I kh = t.rows.begin; kh < t.rows.end; ++kh) {
      const scalar_t* row = slice + (t.h0 + kh * g.dilation_h) * s.h;
      for (I kw = t.cols.begin; kw < t.cols.end; ++kw) {
        const A v = static_cast<A>(row[(t.w0 + kw * g.dilation_w) * s.w]);
        if (replaces_max(v, best.value)) {
          best.value = v;
          best.argmax = (kd * g.kernel_h + kh) * g.kernel_w + kw;
        }
      }
    }
  }
  return best;
}

// Input coordinates of tap `argmax` of window (oh, ow); may lie outside the
// input only for a window with no in-bounds tap.
template <typename I>
struct InputPos {
  I d, h, w;
  POOLX_HD bool inside(const Pool2dGeometryT<I>& g) const {
    return d >= 0 && d < g.in_d && h >= 0 && h < g.in_h && w >= 0 && w < g.in_w;
  }
  // the row of the depth-folded view
  POOLX_HD I row(const Pool2dGeometryT<I>& g) const { return d * g.in_h + h; }
};

// A window's tap number split into its taps along each axis.
template <typename I>
struct Tap {
  I kd, kh, kw;
};

template <typename I>
POOLX_HD Tap<I> split_tap(Same<I> argmax, const Pool2dGeometryT<I>& g) {
  const I plane_taps = g.kernel_h * g.kernel_w;
  const I kd = g.kernel_d == 1 ? 0 : div_nonneg(argmax, plane_taps);
  const I in_plane = argmax - kd * plane_taps;
  const I kh = div_nonneg(in_plane, g.kernel_w);
  return {kd, kh, in_plane - kh * g.kernel_w};
}

template <typename I>
POOLX_HD InputPos<I> decode_argmax(Same<I> argmax, const Pool2dGeometryT<I>& g, Same<I> oh,
                                   Same<I> ow) {
  const Tap<I> k = split_tap(argmax, g);
  const SliceRow<I> o = split_row(oh, g.out_h, g.out_d);
  return {g.axis_d().start(o.d) + k.kd * g.dilation_d, g.axis_h().start(o.h) + k.kh * g.dilation_h,
          g.axis_w().start(ow) + k.kw * g.dilation_w};
}

// Whether `argmax` names a tap of window (oh, ow) that lies inside the input:
// the only values the forward writes, and the only ones the kernels may index
// memory with. A window with no in-bounds tap (dilation + padding) accepts any
// tap, as every path bounds-checks the taps of such windows.
template <typename I>
POOLX_HD bool argmax_is_valid(Same<I> argmax, const Pool2dGeometryT<I>& g, Same<I> oh,
                              Same<I> ow) {
  if (argmax < 0 || argmax >= g.window_size()) return false;
  const WindowTaps<I> t(g, split_row(oh, g.out_h, g.out_d), ow);
  if (t.empty()) return true;
  const Tap<I> k = split_tap(argmax, g);
  return k.kd >= t.depths.begin && k.kd < t.depths.end && k.kh >= t.rows.begin &&
         k.kh < t.rows.end && k.kw >= t.cols.begin && k.kw < t.cols.end;
}

// torch's flat index (d * in_h + h) * in_w + w of the selected tap, clamped
// into the input so that an empty window never yields an out-of-range index.
template <typename I>
POOLX_HD I argmax_to_index_elem(Same<I> argmax, const Pool2dGeometryT<I>& g, Same<I> oh,
                                Same<I> ow) {
  InputPos<I> p = decode_argmax(argmax, g, oh, ow);
  p.d = p.d < 0 ? 0 : (p.d >= g.in_d ? g.in_d - 1 : p.d);
  p.h = p.h < 0 ? 0 : (p.h >= g.in_h ? g.in_h - 1 : p.h);
  p.w = p.w < 0 ? 0 : (p.w >= g.in_w ? g.in_w - 1 : p.w);
  return p.row(g) * g.in_w + p.w;
}

// Visits, in output memory order, every window whose argmax selects input
// (ih, iw) (ih a row of the depth-folded view), passing its offset in the
// output plane; from window (from_oh, from_ow) on where given (the windows
// after one, for unpool's scatter). This order is the order in which
// PyTorch's scatter adds gradients, so sums agree bit for bit.
template <typename argmax_t, typename I, typename Visit>
POOLX_HD void for_each_window_selecting(const argmax_t* argmax_plane, PlaneStridesT<I> s,
                                        const Pool2dGeometryT<I>& g, Same<I> ih, Same<I> iw,
                                        Visit&& visit, Same<I> from_oh = 0, Same<I> from_ow = 0) {
  const SliceRow<I> in = split_row(ih, g.in_h, g.in_d);
  const bool planar = g.planar();  // planes skip the depth's divisions
  const AxisT<I> depth = g.axis_d(), height = g.axis_h(), width = g.axis_w();
  const TapRangeT<I> ods = planar ? TapRangeT<I>{0, 1} : depth.covering(in.d);
  const TapRangeT<I> ohs = height.covering(in.h);
  const TapRangeT<I> ows = width.covering(iw);
  for (I od = ods.begin; od < ods.end; ++od) {
    const I kd = planar ? 0 : depth.tap(in.d, od);
    if (kd < 0) continue;
    const I first_row = od * g.out_h;  // output row of window (od, 0)
    for (I oh = first_row + ohs.begin > from_oh ? first_row + ohs.begin : from_oh;
         oh < first_row + ohs.end; ++oh) {
      const I kh = height.tap(in.h, oh - first_row);
      if (kh < 0) continue;
      for (I ow = oh == from_oh && from_ow > ows.begin ? from_ow : ows.begin; ow < ows.end;
           ++ow) {
        const I kw = width.tap(iw, ow);
        if (kw < 0) continue;
        const I offset = oh * s.h + ow * s.w;
        if (static_cast<I>(argmax_plane[offset]) == (kd * g.kernel_h + kh) * g.kernel_w + kw) {
          visit(offset);
        }
      }
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
  return p.inside(g) ? src_plane[p.row(g) * src_s.h + p.w * src_s.w] : scalar_t(0);
}

}  // namespace poolx
