// Window geometry of 2-D max pooling: where each window starts, which of its
// taps fall inside the input, and which windows can contain a given input row.
#pragma once

#include <cstdint>

#include "poolx/int_div.h"
#include "poolx/macros.h"

namespace poolx {

// I is int64_t everywhere but in CUDA kernels whose every index fits in 32
// bits (cuda_common.cuh's index_width), where 32-bit arithmetic costs a
// fraction of the 64-bit one.
template <typename I>
struct Pool2dGeometryT {
  I in_h, in_w;    // input plane
  I out_h, out_w;  // output plane
  I kernel_h, kernel_w;
  I stride_h, stride_w;
  I pad_h, pad_w;
  I dilation_h, dilation_w;

  template <typename J>
  POOLX_HD Pool2dGeometryT<J> as() const {
    return {static_cast<J>(in_h),     static_cast<J>(in_w),       static_cast<J>(out_h),
            static_cast<J>(out_w),    static_cast<J>(kernel_h),   static_cast<J>(kernel_w),
            static_cast<J>(stride_h), static_cast<J>(stride_w),   static_cast<J>(pad_h),
            static_cast<J>(pad_w),    static_cast<J>(dilation_h), static_cast<J>(dilation_w)};
  }
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
  return g.kernel_h == g.stride_h && g.kernel_w == g.stride_w && g.pad_h == 0 && g.pad_w == 0 &&
         g.dilation_h == 1 && g.dilation_w == 1;
}

// Tiled windows that fit the input exactly: no partial window from ceil mode,
// so every input element lies in at most one window.
inline bool tiles_input(const Pool2dGeometry& g) {
  return is_tiled(g) && g.out_h * g.kernel_h <= g.in_h && g.out_w * g.kernel_w <= g.in_w;
}

}  // namespace poolx
