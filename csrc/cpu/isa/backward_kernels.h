// Vectorized backward along C of windows that tile a channels_last input (the
// gather of other windows: backward_gather.h; NCHW: backward_scatter.h,
// scatter_runs.h and the tiled rows, tiled_rows_backward.h).
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "../argmax_check.h"
#include "forward_kernels.h"
#include "route_16bit.h"
#include "row_taps.h"
#include "stream_stores.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// Vectors a cache line holds: 2 or 4 where a vector is narrower (AVX2).
template <typename T>
constexpr int64_t kVectorsPerLine = std::max<int64_t>(1, 64 / (kLanes * sizeof(T)));

// route_channels streamed, a cache line at a time: each tap's line is
// written whole before the next tap's. Vector by vector, a window of many
// taps leaves as many lines partly written, each finished only after the
// other taps' stores: more lines than the write-combining buffers hold (an
// AMD Zen 3's 7x7 windows streamed far slower than stored). C: a whole
// number of lines; streamed lines start at 64-byte boundaries.
template <typename T, bool kCopy>
inline void route_lines(const T* grad, const uint8_t* argmax, T* window, int64_t C, int64_t kh,
                        int64_t kernel_w, SeenArgmax& seen) {
  constexpr int64_t kLine = kVectorsPerLine<T>;
  for (int64_t c0 = 0; c0 < C; c0 += kLine * kLanes) {
    Vec g[kLine], am[kLine];
    for (int64_t j = 0; j < kLine; ++j) {
      g[j] = load_float(grad + c0 + j * kLanes, kLanes);
      am[j] = load_argmax(argmax + c0 + j * kLanes, kLanes);
      seen.add(am[j]);
    }
    for (int64_t kw = 0; kw < kernel_w; ++kw) {
      for (int64_t j = 0; j < kLine; ++j) {
        store_lanes(window + kw * C + c0 + j * kLanes,
                    select_grad<kCopy>(g[j], am[j], kh * kernel_w + kw), kLanes, true);
      }
    }
  }
}

// The C channels of one output pixel routed to the kernel_w input pixels of
// its window in kernel row kh, through float lanes; route_16bit.h has the
// 16-bit-lane twin. kSpill (C <= kLanes only): each tap is stored as a whole
// vector, whose lanes past C the next tap or window overwrites.
template <typename T, bool kCopy, bool kSpill>
inline void route_channels(const T* grad, const uint8_t* argmax, T* window, int64_t C,
                           int64_t kh, int64_t kernel_w, SeenArgmax& seen, bool stream) {
  if constexpr (kVectorsPerLine<T> > 1 && !kSpill) {
    if (stream && C % (kVectorsPerLine<T> * kLanes) == 0) {
      route_lines<T, kCopy>(grad, argmax, window, C, kh, kernel_w, seen);
      return;
    }
  }
  // with kSpill one vector and no channel loop, which kept the compiler from
  // unrolling the taps
  // A pixel of kLanes channels or more ends on a whole vector that overlaps
  // the one before it (those lanes routed twice, to the same values) instead
  // of a partial vector, which AVX2 loads and stores piece by piece.
  const bool whole = !kSpill && C >= kLanes;
  for (int64_t c = 0; c < (kSpill ? 1 : C); c += kLanes) {
    const int64_t c0 = whole ? std::min(c, C - kLanes) : c;
    const int64_t n = kSpill ? C : std::min(kLanes, C - c0);
    const Vec g = load_float(grad + c0, n);
    const Vec am = load_argmax(argmax + c0, n);
    seen.add(am);
    for (int64_t kw = 0; kw < kernel_w; ++kw) {
      store_lanes(window + kw * C + c0, select_grad<kCopy>(g, am, kh * kernel_w + kw),
                  kSpill ? kLanes : n, stream);
    }
  }
}

// channels_last, tiled: each output pixel's gradient and argmax are loaded
// once and routed to the kernel_w input pixels of its window in this row
// (volumes: window row kd * kernel_h + kh of the depth-folded rows).
// kKernelW: kernel_w known at compile time (2), so the tap loop unrolls; 0
// for any. Sizes are locals, which stores through gi cannot alias.
template <typename T, bool kCopy, int kKernelW>
void backward_channels_last_tiled(const FastBackwardArgs& a, bool stream) {
  const Pool2dGeometry g = a.g;
  const int64_t C = a.in_l.c, rows = a.in_l.n * a.in_l.h;  // a.in_l.h: in_d * in_h
  const int64_t kernel_w = kKernelW ? kKernelW : g.kernel_w;
  const T* const go = static_cast<const T*>(a.grad_output);
  T* const gi = static_cast<T*>(a.grad_input);
  constexpr bool k16BitLanes = kRoutesIn16BitLanes<T>;
  // streaming stores are whole aligned vectors already
  const int64_t spilling =
      stream ? 0
             : spilling_windows(C, g.in_w, g.out_w, kernel_w,
                                k16BitLanes ? spill_lanes_16bit(C) : kLanes);
  at::parallel_for(0, rows, grain_for(g.in_w * C), [=, &a](int64_t b, int64_t e) {
    SeenArgmax seen;
    RowTaps<0> taps(a);
    for (int64_t r = b; r < e; ++r) {
      const int64_t slab = r / g.in_h, ih = r % g.in_h;  // slab: image * in_d + id
      const int64_t id = slab % g.in_d, od = id / g.kernel_d;
      const int64_t oh = ih / g.kernel_h, kh = id % g.kernel_d * g.kernel_h + ih % g.kernel_h;
      const bool pooled = oh < g.out_h && od < g.out_d;
      T* gi_row = gi + r * g.in_w * C;
      const int64_t covered = pooled ? g.out_w * kernel_w : 0;
      const int64_t o_row = ((slab / g.in_d * g.out_d + od) * g.out_h + oh) * g.out_w * C;
      const uint8_t* argmax = pooled ? taps.row(o_row, oh) : nullptr;
      if (pooled && argmax == nullptr) {
        a.argmax_invalid->store(true, std::memory_order_relaxed);
        break;
      }
      // windows [begin, end) of this row; spilling is a template argument
      // (chosen per window at run time it measured no faster than none), and
      // spilling windows never stream, which their few-channel stores feel
      const auto route = [&](int64_t begin, int64_t end, auto spill) {
        const bool stream_here = !spill.value && stream;
        for (int64_t ow = begin; ow < end; ++ow) {
          const int64_t o = ow * C;
          T* window = gi_row + ow * kernel_w * C;
          if constexpr (k16BitLanes) {
            route_channels_16bit<T, kCopy, spill.value>(go + o_row + o, argmax + o, window, C,
                                                        kh, kernel_w, seen, stream_here);
          } else {
            route_channels<T, kCopy, spill.value>(go + o_row + o, argmax + o, window, C, kh,
                                                  kernel_w, seen, stream_here);
          }
        }
      };
      if (pooled) {
        route(0, spilling, std::true_type{});
        route(spilling, g.out_w, std::false_type{});
      }
      fill_zero(gi_row + covered * C, (g.in_w - covered) * C, stream);
    }
    seen.report(g.window_size(), a.argmax_invalid);
    if (stream) stream_fence();
  });
}

template <typename T, bool kCopy = false>
void backward_channels_last_tiled(const FastBackwardArgs& a) {
  const int64_t inputs = a.in_l.numel();
  const bool stream =
      a.in_l.c % kLanes == 0 && worth_streaming(static_cast<T*>(a.grad_input), inputs);
  a.g.kernel_w == 2 ? backward_channels_last_tiled<T, kCopy, 2>(a, stream)
                    : backward_channels_last_tiled<T, kCopy, 0>(a, stream);
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
