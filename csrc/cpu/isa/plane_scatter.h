// The scatter of one plane's output gradients into its sums (backward and
// unpool by argmax: backward_scatter.h), in output order, each 16-bit sum
// rounded to T after every add as torch adds into the element type.
#pragma once

#include <algorithm>
#include <array>
#include <type_traits>
#include <vector>

#include "../argmax_check.h"
#include "../tap_table.h"
#include "../volume_scatter_kernel.h"
#include "forward_kernels.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// The type a gradient of T is added in: float, or double for double.
template <typename T>
using GradFloat = std::conditional_t<std::is_same_v<T, double>, double, float>;

// sum + grad rounded to T, as torch's add into a T rounds it. Sum: T itself,
// or float holding T values (the scratch).
template <typename T, typename Sum>
inline void add_rounded(Sum& sum, GradFloat<T> grad) {
  if constexpr (std::is_same_v<T, double>) {
    sum += grad;
  } else if constexpr (std::is_same_v<Sum, c10::Half>) {
    sum = narrow_half(widen_half(sum) + grad);
  } else if constexpr (std::is_same_v<Sum, T>) {
    sum = narrow<T>(static_cast<float>(sum) + grad);
  } else if constexpr (std::is_same_v<T, c10::BFloat16>) {
    add_rounded_to_bfloat16(&sum, grad);
  } else if constexpr (std::is_same_v<T, c10::Half>) {
    add_rounded_to_half(&sum, grad);
  } else {
    sum = static_cast<float>(static_cast<T>(sum + grad));
  }
}

// The scatter of one plane's output gradients into its sums: pixels of C
// channels (kPixels), or NCHW planes (C is 1, known to the compiler: as a
// run-time 1 the channel loop cost NCHW a sixth of its time); a volume is a
// plane of depth-folded rows of windows (od, oh). Rows of argmax are checked
// before they are used (a volume's whole argmax first, by the caller), and
// the scatter stops at the first invalid one: a valid value names a tap
// inside the input, so only windows with no tap inside it (dilation +
// padding) need a test (ArgmaxRule's row_empty, col_empty, and empty
// slices), and no add does.
// sum receives a window's gradient g: added, or with kCopy stored.
template <typename T, bool kCopy, typename Sum>
inline void put(Sum& sum, T g) {
  if constexpr (kCopy) sum = g;
  else if constexpr (std::is_same_v<T, c10::Half>) add_rounded<T>(sum, widen_half(g));
  else add_rounded<T>(sum, static_cast<GradFloat<T>>(g));
}

// Windows' gradients go[0, n) put at sums[targets[o]] in output order
// (n <= kMaxTargets): the flat runs, their targets worked out first. With
// kOntoZero (windows that share no input), each is added to a zero without
// reading the sum back.
constexpr int64_t kMaxTargets = 4096;
template <typename T, bool kCopy, bool kOntoZero = false, typename Sum>
C10_ALWAYS_INLINE void put_at_targets(const T* go, const int32_t* targets, int64_t n,
                                      Sum* sums) {
  // float16 gradients widened by vectors first: one by one, each widening
  // goes through a 512-bit register (bfloat16's shift is cheaper in place)
  constexpr bool kWidenFirst = !kCopy && std::is_same_v<T, c10::Half>;
  alignas(64) float grads[kWidenFirst ? kMaxTargets : 1];
  if constexpr (kWidenFirst) {
    for (int64_t o = 0; o < n; o += kLanes) {
      load_float(go + o, std::min(kLanes, n - o)).store(grads + o, std::min(kLanes, n - o));
    }
  }
  // unrolled: float32 runs of adaptive windows measured faster (the rolled
  // loop reloaded a pointer the compiler had spilled, every add)
#pragma GCC unroll 4
  for (int64_t o = 0; o < n; ++o) {
    Sum& at = sums[targets[o]];
    Sum sum = kOntoZero ? Sum(0) : at;
    if constexpr (kWidenFirst) add_rounded<T>(sum, grads[o]);
    else put<T, kCopy>(sum, go[o]);
    at = sum;
  }
}

template <typename T, bool kPixels>
class PlaneScatter {
 public:
  PlaneScatter(const Pool2dGeometry& g, int64_t C)
      : g_(g), C_(C), rule_(g), cols_(rule_.interior_cols()), volume_(!g.planar()),
        tap_offsets_(TapOffsets::of(g, C)), disjoint_(windows_disjoint(g)) {
    for (int64_t t = 0; t < g.window_size(); ++t) {
      tap_offset_[t] = tap_offsets_(static_cast<uint32_t>(t));
    }
    for (int64_t od = 0; od < g.out_d; ++od) {
      const TapRange taps = window_taps(od * g.stride_d - g.pad_d, g.kernel_d, g.dilation_d,
                                        g.in_d);
      empty_slices_.push_back(taps.begin >= taps.end);
    }
    if (!kPixels && adds_flat()) {
      for (int64_t od = 0; od < g.out_d; ++od) {
        for (int64_t oh = 0; oh < g.out_h; ++oh) {
          for (int64_t ow = 0; ow < g.out_w; ++ow) {
            window_starts_.push_back(static_cast<int32_t>(row_start(od, oh) + ow * g.stride_w));
          }
        }
      }
    }
  }

  // Adds the plane's gradients into sums (zero on entry); false if an argmax
  // is invalid (the sums are then partial).
  // With kCopy, T is an unsigned type of the values' size and each one's
  // bits are stored instead (unpool: the last window that selects a tap wins).
  template <bool kCopy = false, typename Sum>
  bool add(const T* go, const uint8_t* am, Sum* sums) const {
    // Windows that share no input add each gradient to a zero without
    // reading its sum back: the loads of scattered sums, each waiting on the
    // stores before it, were most of a channels_last head's scatter.
    if (!kCopy && disjoint_) return add_windows<kCopy, /*kOntoZero=*/true>(go, am, sums);
    return add_windows<kCopy, /*kOntoZero=*/false>(go, am, sums);
  }

 private:
  template <bool kCopy, bool kOntoZero, typename Sum>
  bool add_windows(const T* go, const uint8_t* am, Sum* sums) const {
    if constexpr (!kPixels) {
      if (!window_starts_.empty()) return add_flat<kCopy, kOntoZero>(go, am, sums);
    }
    const Pool2dGeometry& g = g_;
    const int64_t C = kPixels ? C_ : 1;
    // rows (od, oh) stepped along, without a division per row
    for (int64_t od = 0, oh = 0; od < g.out_d;
         go += g.out_w * C, am += g.out_w * C, od += ++oh == g.out_h, oh %= g.out_h) {
      if (volume_) {
        if (empty_slices_[od]) continue;
      } else if constexpr (kPixels) {
        if (!rule_.row_valid(am, C, oh)) return false;
      } else if (oh % rule_.nchw_check_rows() == 0 && !rule_.nchw_rows_valid(am, oh)) {
        return false;
      }
      if (rule_.row_empty(oh)) continue;
      const int64_t first = row_start(od, oh);
      const auto add_window = [&](int64_t ow) {
        const int64_t start = (first + ow * g.stride_w) * C;
        for (int64_t o = ow * C, c = 0; c < C; ++o, ++c) {
          Sum& at = sums[start + tap_offset_[am[o]] + c];
          Sum sum = kOntoZero ? Sum(0) : at;
          put<T, kCopy>(sum, go[o]);
          at = sum;
        }
      };
      // cols_ holds the windows wholly inside the input; only the others can be empty
      for (int64_t ow = 0; ow < cols_.begin; ++ow) {
        if (!rule_.col_empty(ow)) add_window(ow);
      }
      for (int64_t ow = cols_.begin; ow < cols_.end; ++ow) add_window(ow);
      for (int64_t ow = cols_.end; ow < g.out_w; ++ow) {
        if (!rule_.col_empty(ow)) add_window(ow);
      }
    }
    return true;
  }

  // NCHW planes of at most this many windows are added as one flat run.
  static constexpr int64_t kFlatMaxOutputs = kMaxTargets;

  // Window (od, oh, 0)'s first tap, before the input where padded.
  int64_t row_start(int64_t od, int64_t oh) const {
    const Pool2dGeometry& g = g_;
    return ((od * g.stride_d - g.pad_d) * g.in_h + oh * g.stride_h - g.pad_h) * g.in_w -
           g.pad_w;
  }

  // Whether the plane's windows may be added as one flat run: few enough,
  // none empty, offsets within int32.
  bool adds_flat() const {
    const Pool2dGeometry& g = g_;
    const bool any_empty_slice =
        std::find(empty_slices_.begin(), empty_slices_.end(), true) != empty_slices_.end();
    return !rule_.any_empty() && !any_empty_slice &&
           g.out_d * g.out_h * g.out_w <= kFlatMaxOutputs &&
           (g.in_d + 2 * g.pad_d) * (g.in_h + 2 * g.pad_h) * (g.in_w + 2 * g.pad_w) <
               (int64_t{1} << 30);
  }

  // add() for an NCHW plane of few windows, none empty: every target first,
  // by arithmetic that vectorizes, then the adds in one loop. Decoding each
  // argmax beside its add put two dependent loads before every add's
  // address, and windows side by side often share their selected tap: the
  // loads of the next adds then waited on the stores before them, and short
  // rows paid their loop's exit at every row.
  template <bool kCopy, bool kOntoZero, typename Sum>
  bool add_flat(const T* go, const uint8_t* am, Sum* sums) const {
    const Pool2dGeometry& g = g_;
    for (int64_t oh = 0; oh < g.out_h && !volume_; oh += rule_.nchw_check_rows()) {
      if (!rule_.nchw_rows_valid(am + oh * g.out_w, oh)) return false;
    }
    const int64_t n = g.out_d * g.out_h * g.out_w;
    const TapOffsets offset = tap_offsets_;  // a local, so that the loop vectorizes
    const int32_t* starts = window_starts_.data();
    // (16 entries more than it needs: without them the bfloat16 adds below
    // measured 1.4x slower, the same instructions in a frame laid out anew)
    alignas(64) int32_t targets[kFlatMaxOutputs + 16];
    for (int64_t o = 0; o < n; ++o) targets[o] = starts[o] + offset(am[o]);
    put_at_targets<T, kCopy, kOntoZero>(go, targets, n, sums);
    return true;
  }

  const Pool2dGeometry g_;
  const int64_t C_;
  const ArgmaxRule rule_;
  const TapRange cols_;
  const bool volume_;  // depth-folded rows, the argmax checked by the caller
  const TapOffsets tap_offsets_;
  const bool disjoint_;  // no two windows share an input element
  std::vector<bool> empty_slices_;  // od -> no tap of its windows' depth inside
  std::array<int32_t, 256> tap_offset_{};  // tap_offsets_ looked up
  std::vector<int32_t> window_starts_;  // add_flat's: each window's first tap
};

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
