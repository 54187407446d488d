// Window geometry of 2-D and 3-D max pooling: where each window starts, which
// of its taps fall inside the input, and which windows can contain a given
// input row. 2-D pooling is 3-D pooling of unit depth.
#pragma once

#include <cstdint>

#include "poolx/int_div.h"
#include "poolx/macros.h"

namespace poolx {

// I is int64_t everywhere but in CUDA kernels whose every index fits in 32
// bits (cuda_common.cuh's index_width), where 32-bit arithmetic costs a
// fraction of the 64-bit one.
//
// A 3-D volume reaches the kernels as a 4-D tensor whose rows are the rows of
// its depth slices, one slice after another (N, C, D * H, W): the kernels'
// traversal and memory layouts are those of 2-D, and only the element
// functions (elements.h) split a row into its depth and height. The 2-D fast
// paths take the planar geometries alone.
template <typename I>
struct AxisT;

template <typename I>
struct Pool2dGeometryT {
  I in_h, in_w;    // input plane
  I out_h, out_w;  // output plane
  I kernel_h, kernel_w;
  I stride_h, stride_w;
  I pad_h, pad_w;
  I dilation_h, dilation_w;
  // depth: 1 slice, one tap, for 2-D pooling
  I in_d = 1, out_d = 1, kernel_d = 1, stride_d = 1, pad_d = 0, dilation_d = 1;

  template <typename J>
  POOLX_HD Pool2dGeometryT<J> as() const {
    return {static_cast<J>(in_h),       static_cast<J>(in_w),       static_cast<J>(out_h),
            static_cast<J>(out_w),      static_cast<J>(kernel_h),   static_cast<J>(kernel_w),
            static_cast<J>(stride_h),   static_cast<J>(stride_w),   static_cast<J>(pad_h),
            static_cast<J>(pad_w),      static_cast<J>(dilation_h), static_cast<J>(dilation_w),
            static_cast<J>(in_d),       static_cast<J>(out_d),      static_cast<J>(kernel_d),
            static_cast<J>(stride_d),   static_cast<J>(pad_d),      static_cast<J>(dilation_d)};
  }

  // One depth slice in and out, one tap deep: 2-D pooling of planes, which
  // the 2-D fast paths handle.
  POOLX_HD bool planar() const { return in_d == 1 && out_d == 1 && kernel_d == 1; }
  POOLX_HD I window_size() const { return kernel_d * kernel_h * kernel_w; }
  // Whether an axis is adaptive (AxisT): only the element functions serve these.
  POOLX_HD bool adaptive() const { return stride_d == 0 || stride_h == 0 || stride_w == 0; }

  POOLX_HD AxisT<I> axis_d() const { return {in_d, out_d, kernel_d, stride_d, pad_d, dilation_d}; }
  POOLX_HD AxisT<I> axis_h() const { return {in_h, out_h, kernel_h, stride_h, pad_h, dilation_h}; }
  POOLX_HD AxisT<I> axis_w() const { return {in_w, out_w, kernel_w, stride_w, pad_w, dilation_w}; }
};
using Pool2dGeometry = Pool2dGeometryT<int64_t>;

// Half-open range of taps [begin, end) of one window axis that land inside
// [0, size). begin is the first in-bounds tap; begin >= end means no tap does.
template <typename I>
struct TapRangeT {
  I begin, end;
};
using TapRange = TapRangeT<int64_t>;

// The index type is the first argument's; the others convert to it (a
// non-deduced context, as C++20's std::type_identity_t).
template <typename I>
struct SameType {
  using type = I;
};
template <typename I>
using Same = typename SameType<I>::type;

template <typename I>
POOLX_HD I ceil_div_nonneg(I a, Same<I> b) {
  return a <= 0 ? 0 : div_nonneg(a + b - 1, b);
}

template <typename I>
POOLX_HD TapRangeT<I> window_taps(I start, Same<I> kernel, Same<I> dilation, Same<I> size) {
  const I begin = ceil_div_nonneg<I>(-start, dilation);
  const I in_range = ceil_div_nonneg<I>(size - start, dilation);
  return {begin, in_range < kernel ? in_range : kernel};
}

// Outputs [begin, end) along one axis whose window can cover input position i.
template <typename I>
POOLX_HD TapRangeT<I> windows_covering(I i, Same<I> kernel, Same<I> stride, Same<I> pad,
                                       Same<I> dilation, Same<I> out_size) {
  const I last = div_nonneg(i + pad, stride) + 1;
  return {ceil_div_nonneg<I>(i + pad - (kernel - 1) * dilation, stride),
          last < out_size ? last : out_size};
}

// Tap index of input position i inside window o along one axis, or -1 if the
// window's taps skip over i (dilation).
template <typename I>
POOLX_HD I tap_of(I i, Same<I> o, Same<I> stride, Same<I> pad, Same<I> dilation) {
  const I offset = i + pad - o * stride;  // >= 0 for the windows that cover i
  const I tap = div_nonneg(offset, dilation);
  return tap * dilation == offset ? tap : -1;
}

// One axis of a geometry. Its windows step by `stride`, or, where stride is 0
// (which no pooling argument may be), the axis is adaptive as torch's
// adaptive max pooling: window o spans [floor(o * in / out),
// ceil((o + 1) * in / out)), at most `kernel` taps (the widest span), with no
// padding or dilation. The products take 64 bits: o * in may not fit I.
template <typename I>
struct AxisT {
  I in, out, kernel, stride, pad, dilation;

  POOLX_HD I start(I o) const {
    return stride != 0 ? o * stride - pad : static_cast<I>(int64_t{o} * in / out);
  }
  // The in-bounds taps of window o that starts at `first` (start(o)).
  POOLX_HD TapRangeT<I> taps(I o, I first) const {
    if (stride != 0) return window_taps(first, kernel, dilation, in);
    return {0, static_cast<I>((int64_t{o + 1} * in + out - 1) / out) - first};
  }
  // The windows that cover input position i.
  POOLX_HD TapRangeT<I> covering(I i) const {
    if (stride != 0) return windows_covering(i, kernel, stride, pad, dilation, out);
    return {static_cast<I>(int64_t{i} * out / in),
            static_cast<I>((int64_t{i + 1} * out + in - 1) / in)};
  }
  // The tap of window o at input position i (which it covers), or -1.
  POOLX_HD I tap(I i, I o) const {
    return stride != 0 ? tap_of(i, o, stride, pad, dilation) : i - start(o);
  }
};

// The widest window of an adaptive axis: in / out where that divides, else
// at most ceil(in / out) + 1 (what every caller takes, so that an argmax
// means the same to all).
inline int64_t adaptive_kernel(int64_t in, int64_t out) {
  if (out <= 0) return 1;
  return in % out == 0 ? (in / out > 0 ? in / out : 1) : (in + out - 1) / out + 1;
}

// Outputs [first, last) of an axis whose windows lie wholly inside the input.
inline TapRange interior_outputs(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                 int64_t pad, int64_t dilation) {
  const int64_t span = in + pad - (kernel - 1) * dilation - 1;  // last window start + pad
  int64_t first = ceil_div_nonneg(pad, stride);
  first = first < out ? first : out;
  int64_t last = span < 0 ? 0 : span / stride + 1;
  last = last < out ? last : out;
  return {first, last > first ? last : first};
}

// torch's pooling_output_shape: floor or ceil division, and in ceil mode the
// last window must start inside the input or the left padding.
inline int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  // floor division that rounds toward -inf, as torch's div_rtn
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The geometry is tiled when every input element lies in at most one window
// and windows have no holes: kernel == stride, no padding, no dilation.
inline bool is_tiled(const Pool2dGeometry& g) {
  return g.planar() && g.kernel_h == g.stride_h && g.kernel_w == g.stride_w && g.pad_h == 0 && g.pad_w == 0 &&
         g.dilation_h == 1 && g.dilation_w == 1;
}

// Tiled windows that fit the input exactly: no partial window from ceil mode,
// so every input element lies in at most one window.
inline bool tiles_input(const Pool2dGeometry& g) {
  return is_tiled(g) && g.out_h * g.kernel_h <= g.in_h && g.out_w * g.kernel_w <= g.in_w;
}

// Whether every window of a volume lies wholly inside it: no padding reached,
// no partial window of ceil mode, on any axis.
inline bool windows_inside(const Pool2dGeometry& g) {
  const auto axis = [](int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad,
                       int64_t dilation) {
    const TapRange inside = interior_outputs(in, out, kernel, stride, pad, dilation);
    return inside.begin == 0 && inside.end == out;
  };
  return axis(g.in_d, g.out_d, g.kernel_d, g.stride_d, g.pad_d, g.dilation_d) &&
         axis(g.in_h, g.out_h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h) &&
         axis(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w);
}

// Tiled rows of volumes too: windows that tile each plane as tiles_input
// does and stack kernel_d slices deep, stepping as deep (what floor mode
// drops aside), so every input element lies in at most one window.
inline bool tiles_volume(const Pool2dGeometry& g) {
  Pool2dGeometry plane = g;
  plane.in_d = plane.out_d = plane.kernel_d = plane.stride_d = 1;
  return tiles_input(plane) && g.kernel_d == g.stride_d && g.pad_d == 0 && g.dilation_d == 1 &&
         g.out_d * g.kernel_d <= g.in_d;
}

}  // namespace poolx
