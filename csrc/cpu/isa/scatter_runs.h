// The backward that kernels_cpu.cpp scatters (adaptive windows, windows of
// many taps, planes of few windows), compiled per ISA: NCHW planes (NCDHW
// volumes) by runs of windows, as PlaneScatter's flat run adds a plane of
// few windows: every window's target and check first, by vector arithmetic,
// then the adds in output order. The table scatter (volume_scatter_kernel.h)
// put two dependent loads before each add's address: the loads of the next
// adds ran ahead of the stores before them, and ran again where neighbouring
// windows select the same input (their overlap). Planes of few windows (a
// pyramid's 4x4) go several at a time, so that a run fills whole vectors.
// channels_last, and planes the runs do not take, go by the table.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "../volume_scatter_kernel.h"
#include "../window_table.h"
#include "plane_scatter.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// The windows of `planes` planes side by side, added as one run.
class WindowRun {
 public:
  WindowRun(const Pool2dGeometry& g, int64_t planes)
      : kernel_h_(static_cast<int32_t>(g.kernel_h)),
        kernel_w_(static_cast<int32_t>(g.kernel_w)),
        offsets_(TapOffsets::of(g, 1)),
        windows_(planes * g.out_d * g.out_h * g.out_w),
        // the last vector's padding: windows that accept any value
        padded_((windows_ + kPad - 1) / kPad * kPad),
        starts_(padded_, 0),
        taps_(6 * padded_, 0),
        by_table_(g.kernel_d * g.kernel_h * g.kernel_w <= kTableTaps) {
    const AxisWindows ds(g.axis_d()), hs(g.axis_h()), ws(g.axis_w());
    const int64_t plane = g.in_d * g.in_h * g.in_w;
    int64_t o = 0;
    const auto set_taps = [&](int64_t axis, TapRange taps) {
      taps_[2 * axis * padded_ + o] = static_cast<int32_t>(taps.begin);
      taps_[(2 * axis + 1) * padded_ + o] = static_cast<int32_t>(taps.end);
    };
    // the first plane's windows; the others copy them, a plane further on
    const int64_t out_plane = planes > 0 ? windows_ / planes : 0;
    for (int64_t od = 0; od < g.out_d && o < windows_; ++od) {
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        for (int64_t ow = 0; ow < g.out_w; ++ow, ++o) {
          starts_[o] =
              static_cast<int32_t>((ds.start[od] * g.in_h + hs.start[oh]) * g.in_w + ws.start[ow]);
          set_taps(0, ds.taps[od]);
          set_taps(1, hs.taps[oh]);
          set_taps(2, ws.taps[ow]);
        }
      }
    }
    for (; o < windows_; ++o) {
      starts_[o] = starts_[o - out_plane] + static_cast<int32_t>(plane);
      for (int64_t row = 0; row < 6; ++row) {
        taps_[row * padded_ + o] = taps_[row * padded_ + o - out_plane];
      }
    }
    for (; o < padded_; ++o) {
      for (int64_t axis = 0; axis < 3; ++axis) set_taps(axis, {0, INT32_MAX});
    }
    if (by_table_) set_tap_table(g, out_plane);
  }

  int64_t windows() const { return windows_; }

  // Adds the run's gradients into sums (zero on entry); false, with no add
  // made, if an argmax names no tap of its window inside the input.
  template <bool kOntoZero, typename T, typename Sum>
  bool add(const T* go, const uint8_t* am, Sum* sums) const {
    using IVec = at::vec::Vectorized<int32_t>;
    const int64_t n = windows_, padded = padded_;
    const TapOffsets& t = offsets_;
    const IVec kernel_h(kernel_h_), kernel_w(kernel_w_),
        row_mul(static_cast<int32_t>(t.row_mul)), slice_mul(static_cast<int32_t>(t.slice_mul)),
        col_step(t.col_step), row_step(t.row_step), slice_step(t.slice_step), shift(16);
    const int32_t* const taps = taps_.data();
    alignas(64) int32_t targets[kMaxTargets];
    IVec bad(0);
    const IVec one(1), zero(0);
    for (int64_t o = 0; o < n && by_table_; o += IVec::size()) {
      const IVec v = bytes_as_int32(am + o, std::min<int64_t>(IVec::size(), n - o));
      // bit v of the window's taps: 0 where v names none (v >= 31 shifts
      // every bit out, the sign bit being clear)
      bad = bad | (((IVec::loadu(inside_.data() + o) >> v) & one) == zero);
      (IVec::loadu(starts_.data() + o) + tap_lookup(v)).store(targets + o);
    }
    for (int64_t o = 0; o < n && !by_table_; o += IVec::size()) {
      const IVec v = bytes_as_int32(am + o, std::min<int64_t>(IVec::size(), n - o));
      const IVec row = (v * row_mul) >> shift, slice = (v * slice_mul) >> shift;
      const IVec kh = row - slice * kernel_h, kw = v - row * kernel_w;
      // a tap outside [begin, end) along an axis; one past the taps has
      // slice >= kernel_d >= the end along D
      const auto outside = [&](const IVec& k, int64_t axis) {
        const int32_t* range = taps + axis * 2 * padded + o;
        return (k < IVec::loadu(range)) | (k >= IVec::loadu(range + padded));
      };
      bad = bad | outside(slice, 0) | outside(kh, 1) | outside(kw, 2);
      (IVec::loadu(starts_.data() + o) + v * col_step + row * row_step + slice * slice_step)
          .store(targets + o);
    }
    alignas(64) int32_t lanes[IVec::size()];
    bad.store(lanes);
    if (std::any_of(lanes, lanes + IVec::size(), [](int32_t lane) { return lane != 0; })) {
      return false;
    }
    put_at_targets<T, false, kOntoZero>(go, targets, n, sums);
    return true;
  }

 private:
  static constexpr int64_t kPad = 16;  // a multiple of every ISA's int32 lanes

  // Windows of up to kTableTaps taps look each argmax's offset up (one
  // permute, or a few on AVX2) and check it by a bit of the window's taps:
  // the division by multiplies and the six range compares of larger
  // windows took most of the run's time.
  static constexpr int64_t kTableTaps = 31;

  void set_tap_table(const Pool2dGeometry& g, int64_t out_plane) {
    for (int64_t t = 0; t < kTableTaps; ++t) tap_offset_[t] = offsets_(static_cast<uint32_t>(t));
    const auto range = [&](int64_t axis, int64_t o) {
      return std::make_pair(taps_[2 * axis * padded_ + o], taps_[(2 * axis + 1) * padded_ + o]);
    };
    for (int64_t o = 0; o < out_plane; ++o) {
      const auto [d0, d1] = range(0, o);
      const auto [h0, h1] = range(1, o);
      const auto [w0, w1] = range(2, o);
      const uint32_t row = ((uint32_t{1} << (w1 - w0)) - 1) << w0;  // the taps of a tap row
      uint32_t bits = 0;
      for (int64_t kd = d0; kd < d1; ++kd) {
        for (int64_t kh = h0; kh < h1; ++kh) bits |= row << ((kd * g.kernel_h + kh) * g.kernel_w);
      }
      inside_[o] = static_cast<int32_t>(bits);
    }
    for (int64_t o = out_plane; o < windows_; ++o) inside_[o] = inside_[o - out_plane];
  }

  // The offsets of taps v (each below 32) from tap_offset_.
  C10_ALWAYS_INLINE at::vec::Vectorized<int32_t> tap_lookup(
      const at::vec::Vectorized<int32_t>& v) const {
#if defined(CPU_CAPABILITY_AVX512)
    return _mm512_permutex2var_epi32(_mm512_load_si512(tap_offset_), v,
                                     _mm512_load_si512(tap_offset_ + 16));
#elif defined(CPU_CAPABILITY_AVX2)
    // eight taps a permute; bits 3 and 4 of v, shifted to the sign, select
    const auto part = [&](int64_t i) {
      return _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(tap_offset_ + 8 * i)), v));
    };
    const __m256 bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(v, 28)),
                 bit4 = _mm256_castsi256_ps(_mm256_slli_epi32(v, 27));
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_blendv_ps(part(0), part(1), bit3),
                                                _mm256_blendv_ps(part(2), part(3), bit3), bit4));
#else
    alignas(64) int32_t lanes[at::vec::Vectorized<int32_t>::size()];
    v.store(lanes);
    for (int32_t& lane : lanes) lane = tap_offset_[lane & 31];
    return at::vec::Vectorized<int32_t>::loadu(lanes);
#endif
  }

  const int32_t kernel_h_, kernel_w_;
  const TapOffsets offsets_;
  const int64_t windows_, padded_;
  std::vector<int32_t> starts_;  // each window's first tap (before the input where padded)
  // the taps inside the input, by axis D, H, W: the begin of every window,
  // then the end of every window, as the vector loop reads them
  std::vector<int32_t> taps_;
  const bool by_table_;
  // by_table_: each window's taps inside the input, bit t for tap t (every
  // bit below 31 for the padding)
  std::vector<int32_t> inside_ = std::vector<int32_t>(by_table_ ? padded_ : 0, INT32_MAX);
  alignas(64) int32_t tap_offset_[32] = {};
};

// Runs of at least this many windows where planes are small enough.
constexpr int64_t kRunWindows = 256;
// The planes of a run take at most this many bytes: half the L1 cache.
constexpr int64_t kRunBytes = 16 * 1024;

// Whether the backward of g goes by runs: NCHW planes of 1 to kMaxTargets
// windows, none without a tap inside the input (any value is valid there),
// offsets within int32, the offset of any byte value's tap too (checked
// after it is worked out).
inline bool adds_by_runs(const Pool2dGeometry& g, const Layout4d& in_l) {
  const auto any_empty = [](const AxisT<int64_t>& axis) { return AxisWindows(axis).any_empty(); };
  const int64_t padded = (g.in_d + 2 * g.pad_d) * (g.in_h + 2 * g.pad_h) * (g.in_w + 2 * g.pad_w);
  const int64_t reach = 255 * (g.dilation_w + g.dilation_h * g.in_w + g.kernel_w * g.dilation_w +
                               (g.dilation_d * g.in_h + g.kernel_h * g.dilation_h) * g.in_w);
  const int64_t windows = g.out_d * g.out_h * g.out_w;
  return !in_l.channels_last && windows > 0 && windows <= kMaxTargets &&
         g.in_d * g.in_h * g.in_w > 0 && padded + reach < (int64_t{1} << 30) &&
         !any_empty(g.axis_d()) && !any_empty(g.axis_h()) && !any_empty(g.axis_w());
}

// The backward by runs of whole NCHW planes, each zeroed, then summed in
// place while in the L1 cache; where no two windows share an input
// (disjoint), each gradient is added to a zero, the sum not read back.
template <typename T>
void backward_by_runs(const FastBackwardArgs& a, bool disjoint) {
  const Pool2dGeometry& g = a.g;
  const T* const go = static_cast<const T*>(a.grad_output);
  T* const gi = static_cast<T*>(a.grad_input);
  const int64_t plane = g.in_d * g.in_h * g.in_w, out_plane = g.out_d * g.out_h * g.out_w;
  const int64_t planes = a.in_l.n * a.in_l.c;
  const int64_t by_windows = std::max<int64_t>(1, kRunWindows / out_plane);
  const int64_t by_bytes =
      std::max<int64_t>(1, kRunBytes / (plane * static_cast<int64_t>(sizeof(T))));
  const int64_t run_planes = std::min({by_windows, by_bytes, kMaxTargets / out_plane, planes});
  if (run_planes == 0) return;  // no plane
  const int64_t runs = planes / run_planes, rest = planes % run_planes;
  const WindowRun run(g, run_planes);
  std::optional<WindowRun> last;  // the rest of the planes, if any
  if (rest != 0) last.emplace(g, rest);
  const auto add_runs = [&](auto onto_zero) {
    at::parallel_for(0, runs + (rest != 0), grain_for(run_planes * plane), [&](int64_t b,
                                                                               int64_t e) {
      bool valid = true;
      for (int64_t r = b; r < e && valid; ++r) {  // an invalid argmax ends the task
        const WindowRun& here = r < runs ? run : *last;
        const int64_t first = r * run_planes;
        T* const sums = gi + first * plane;
        zero_bytes(sums, here.windows() / out_plane * plane * sizeof(T));
        valid &= here.template add<decltype(onto_zero)::value>(
            go + first * out_plane, a.argmax + first * out_plane, sums);
      }
      if (!valid) a.argmax_invalid->store(true, std::memory_order_relaxed);
    });
  };
  if (disjoint) {
    add_runs(std::true_type{});
  } else {
    add_runs(std::false_type{});
  }
}

// The backward that kernels_cpu.cpp scatters, of T (a null T* names it).
template <typename T>
void scatter_windows_add(const FastBackwardArgs& a, T* /*type*/) {
  const Pool2dGeometry& g = a.g;
  if (adds_by_runs(g, a.in_l)) {
    backward_by_runs<T>(a, windows_disjoint(g));
    return;
  }
  const T* const go = static_cast<const T*>(a.grad_output);
  T* const gi = static_cast<T*>(a.grad_input);
  const bool valid =
      a.in_l.channels_last
          ? scatter_windows<Scatter::kAdd, false>(go, a.argmax, gi, a.out_l, a.g)
          : scatter_windows<Scatter::kAdd, true>(go, a.argmax, gi, a.out_l, a.g);
  if (!valid) a.argmax_invalid->store(true, std::memory_order_relaxed);
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
