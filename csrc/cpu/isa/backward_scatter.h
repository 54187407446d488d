// Backward, any geometry, by a scatter per NCHW plane or per channels_last
// image of few channels: each output's gradient is added at its selected tap
// in output order (pixel by pixel, a pixel's channels in order), the order in
// which torch's CPU kernels and the per-element gather sum, so results agree
// bit for bit. 16-bit sums round to T after every add, as torch adds into the
// element type. NCHW unpool by argmax is the same scatter with each value's
// bits stored instead of added: the last window that selects a tap wins.
//
// A plane is summed in a float scratch that stays in the cache, then copied
// to grad_input (streamed where the gradient is large), the scratch zeroed
// as it is read: grad_input is written once, never read. Summed in
// grad_input itself, every line of it would be read for the zero-fill
// first, and each 16-bit sum widened before its add and narrowed after.
// Planes too large for the cache, and float32 gradients that stay in it,
// are summed in place.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <type_traits>
#include <vector>

#include "../argmax_check.h"
#include "forward_kernels.h"
#include "stream_stores.h"

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
// run-time 1 the channel loop cost NCHW a sixth of its time). Rows of argmax
// are checked before they are used, and the scatter stops at the first
// invalid one: a valid value names a tap inside the input, so only windows
// with no tap inside it (dilation + padding) need a test (ArgmaxRule's
// row_empty, col_empty), and no add does.
// A tap's offset from its window's first tap, by arithmetic (no division,
// no table): the tap row by ArgmaxRule's multiply, then whole rows of
// taps and columns. The tables of add() and the flat run's vectorized
// targets both come from it.
struct TapOffsets {
  uint32_t row_mul;  // ArgmaxRule::tap_row_mul
  int32_t col_step, row_step;
  int32_t operator()(uint32_t tap) const {
    const uint32_t kh = (tap * row_mul) >> 16;
    return static_cast<int32_t>(tap) * col_step + static_cast<int32_t>(kh) * row_step;
  }
};

template <typename T, bool kPixels>
class PlaneScatter {
 public:
  PlaneScatter(const Pool2dGeometry& g, int64_t C)
      : g_(g), C_(C), rule_(g), cols_(rule_.interior_cols()),
        // a tap row further down: dilation_h input rows, less the kernel_w taps
        tap_offsets_{
            rule_.tap_row_mul(), static_cast<int32_t>(g.dilation_w * C),
            static_cast<int32_t>((g.dilation_h * g.in_w - g.kernel_w * g.dilation_w) * C)} {
    for (int64_t t = 0; t < g.kernel_h * g.kernel_w; ++t) {
      tap_offset_[t] = tap_offsets_(static_cast<uint32_t>(t));
    }
    if (!kPixels && adds_flat()) {
      window_starts_.resize(g.out_h * g.out_w);
      for (int64_t oh = 0, o = 0; oh < g.out_h; ++oh) {
        for (int64_t ow = 0; ow < g.out_w; ++ow, ++o) {
          window_starts_[o] = static_cast<int32_t>((oh * g.stride_h - g.pad_h) * g.in_w +
                                                   ow * g.stride_w - g.pad_w);
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
    if constexpr (!kPixels) {
      if (!window_starts_.empty()) return add_flat<kCopy>(go, am, sums);
    }
    const Pool2dGeometry& g = g_;
    const int64_t C = kPixels ? C_ : 1;
    for (int64_t oh = 0; oh < g.out_h; ++oh, go += g.out_w * C, am += g.out_w * C) {
      if constexpr (kPixels) {
        if (!rule_.row_valid(am, C, oh)) return false;
      } else if (oh % rule_.nchw_check_rows() == 0 && !rule_.nchw_rows_valid(am, oh)) {
        return false;
      }
      if (rule_.row_empty(oh)) continue;
      // window (oh, 0)'s first tap, before the input where padded
      const int64_t row_start = (oh * g.stride_h - g.pad_h) * g.in_w - g.pad_w;
      const auto add_window = [&](int64_t ow) {
        const int64_t start = (row_start + ow * g.stride_w) * C;
        for (int64_t o = ow * C, c = 0; c < C; ++o, ++c) {
          put<kCopy>(sums[start + tap_offset_[am[o]] + c], go[o]);
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

 private:
  // NCHW planes of at most this many windows are added as one flat run.
  static constexpr int64_t kFlatMaxOutputs = 4096;

  // Whether the plane's windows may be added as one flat run: few enough,
  // none empty, offsets within int32.
  bool adds_flat() const {
    const Pool2dGeometry& g = g_;
    return !rule_.any_empty() && g.out_h * g.out_w <= kFlatMaxOutputs &&
           (g.in_h + 2 * g.pad_h) * (g.in_w + 2 * g.pad_w) < (int64_t{1} << 30);
  }

  // add() for an NCHW plane of few windows, none empty: every target first,
  // by arithmetic that vectorizes, then the adds in one loop. Decoding each
  // argmax beside its add put two dependent loads before every add's
  // address, and windows side by side often share their selected tap: the
  // loads of the next adds then waited on the stores before them, and short
  // rows paid their loop's exit at every row.
  template <bool kCopy, typename Sum>
  bool add_flat(const T* go, const uint8_t* am, Sum* sums) const {
    const Pool2dGeometry& g = g_;
    for (int64_t oh = 0; oh < g.out_h; oh += rule_.nchw_check_rows()) {
      if (!rule_.nchw_rows_valid(am + oh * g.out_w, oh)) return false;
    }
    const int64_t n = g.out_h * g.out_w;
    const TapOffsets offset = tap_offsets_;  // a local, so that the loop vectorizes
    const int32_t* starts = window_starts_.data();
    alignas(64) int32_t targets[kFlatMaxOutputs];
    for (int64_t o = 0; o < n; ++o) targets[o] = starts[o] + offset(am[o]);
    // float16 gradients widened by vectors first: one by one, each widening
    // goes through a 512-bit register (bfloat16's shift is cheaper in place)
    constexpr bool kWidenFirst = !kCopy && std::is_same_v<T, c10::Half>;
    alignas(64) float grads[kWidenFirst ? kFlatMaxOutputs : 1];
    if constexpr (kWidenFirst) {
      for (int64_t o = 0; o < n; o += kLanes) {
        load_float(go + o, std::min(kLanes, n - o)).store(grads + o, std::min(kLanes, n - o));
      }
    }
    for (int64_t o = 0; o < n; ++o) {
      if constexpr (kWidenFirst) add_rounded<T>(sums[targets[o]], grads[o]);
      else put<kCopy>(sums[targets[o]], go[o]);
    }
    return true;
  }

  // sum receives a window's gradient g: added, or with kCopy stored.
  template <bool kCopy, typename Sum>
  static void put(Sum& sum, T g) {
    if constexpr (kCopy) sum = g;
    else if constexpr (std::is_same_v<T, c10::Half>) add_rounded<T>(sum, widen_half(g));
    else add_rounded<T>(sum, static_cast<GradFloat<T>>(g));
  }

  const Pool2dGeometry g_;
  const int64_t C_;
  const ArgmaxRule rule_;
  const TapRange cols_;
  const TapOffsets tap_offsets_;
  std::array<int32_t, 256> tap_offset_{};  // tap_offsets_ looked up
  std::vector<int32_t> window_starts_;  // add_flat's: each window's first tap
};

// sums (T values) copied to out, exactly; sums left zero.
template <typename T>
inline void move_sums(float* sums, T* out, int64_t n, bool stream) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    store_lanes(out + i, Vec::loadu(sums + i), kLanes, stream);
    Vec(0.f).store(sums + i);
  }
  for (; i < n; ++i) {
    out[i] = static_cast<T>(sums[i]);
    sums[i] = 0.f;
  }
}

// scratch's n elements moved to out bit for bit (streamed where `stream`),
// scratch left zero: B is an unsigned type, its elements moved as float lanes.
template <typename B>
inline void move_bits(B* scratch, B* out, int64_t n, bool stream) {
  constexpr int64_t kStep = kLanes * sizeof(float) / sizeof(B);
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const Vec v = Vec::loadu(scratch + i);
    if (stream && vector_aligned(out + i)) stream_vector(reinterpret_cast<float*>(out + i), v);
    else v.store(out + i);
    Vec(0.f).store(scratch + i);
  }
  std::copy(scratch + i, scratch + n, out + i);
  std::fill(scratch + i, scratch + n, B(0));
}

// Planes whose float sums take at most this many bytes are summed in a
// scratch: half the L2 cache, beside the rows of gradient and argmax.
constexpr int64_t kScratchMaxBytes = 256 * 1024;

// Each task sums whole planes: NCHW planes, or channels_last images. With
// kCopy (unpool by argmax), T is an unsigned type of the values' size, and
// the plane receives each value's bits where its window selects.
template <typename T, bool kPixels, bool kCopy = false>
void backward_scatter(const FastBackwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const T* const go = static_cast<const T*>(a.grad_output);
  T* const gi = static_cast<T*>(a.grad_input);
  const int64_t C = a.in_l.channels_last ? a.in_l.c : 1;
  const PlaneScatter<T, kPixels> scatter(g, C);
  const int64_t plane = g.in_h * g.in_w * C, out_plane = g.out_h * g.out_w * C;
  const int64_t planes = a.in_l.n * a.in_l.c / C;
  // Streamed whole, every plane starts a cache line. A float32 gradient
  // that stays in the cache is as fast to sum in place, without the
  // scratch's extra pass.
  const bool stream = worth_streaming(gi, planes * plane) &&
                      plane * static_cast<int64_t>(sizeof(T)) % 64 == 0;
  // holds T values exactly: float sums, or the bits themselves
  using Scratch = std::conditional_t<kCopy, T, float>;
  constexpr bool kScratch = kCopy || sizeof(T) <= sizeof(float);
  const bool in_scratch = kScratch &&
                          plane * static_cast<int64_t>(sizeof(Scratch)) <= kScratchMaxBytes &&
                          (stream || sizeof(T) < sizeof(float));
  at::parallel_for(0, planes, grain_for(plane), [&](int64_t b, int64_t e) {
    bool valid = true;
    std::vector<Scratch> sums(in_scratch ? plane : 0);
    for (int64_t p = b; p < e && valid; ++p) {  // an invalid argmax ends the task
      const T* go_plane = go + p * out_plane;
      const uint8_t* am_plane = a.argmax + p * out_plane;
      T* gi_plane = gi + p * plane;
      if constexpr (kScratch) {
        if (in_scratch) {
          valid &= scatter.template add<kCopy>(go_plane, am_plane, sums.data());
          if constexpr (kCopy) move_bits(sums.data(), gi_plane, plane, stream);
          else move_sums(sums.data(), gi_plane, plane, stream);
          continue;
        }
      }
      std::fill_n(gi_plane, plane, T(0));
      valid &= scatter.template add<kCopy>(go_plane, am_plane, gi_plane);
    }
    if (!valid) a.argmax_invalid->store(true, std::memory_order_relaxed);
    if (stream) stream_fence();
  });
}

template <typename T>
void backward_scatter(const FastBackwardArgs& a) {
  a.in_l.channels_last ? backward_scatter<T, true>(a) : backward_scatter<T, false>(a);
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
