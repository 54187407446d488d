// The channels_last backward by a gather: each input pixel sums the windows
// that cover it, a vector of channels at a time, and is written once, with
// no zeroing first and no read back. Windows that step (where they neither
// tile the input nor scatter faster per image: backward_routes.h) and
// adaptive windows that cover wide pixels densely.
#pragma once

#include <ATen/Parallel.h>

#include <array>
#include <atomic>
#include <optional>
#include <type_traits>
#include <vector>

#include "../argmax_check.h"
#include "argmax_lanes.h"
#include "forward_kernels.h"
#include "stream_stores.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// The windows of one axis that cover each input position, and its tap in
// each, in output order: position i's are entries [first[i], first[i + 1]).
struct AxisCover {
  std::vector<int64_t> first, window, tap;

  explicit AxisCover(const AxisT<int64_t>& axis) {
    for (int64_t i = 0; i < axis.in; ++i) {
      first.push_back(static_cast<int64_t>(window.size()));
      const TapRange os = axis.covering(i);
      for (int64_t o = os.begin; o < os.end; ++o) {
        if (const int64_t k = axis.tap(i, o); k >= 0) {
          window.push_back(o);
          tap.push_back(k);
        }
      }
    }
    first.push_back(static_cast<int64_t>(window.size()));
  }
};

// kSumChains vectors of channels are summed side by side: one sum is a chain
// of dependent adds (and roundings), too slow on its own.
constexpr int64_t kSumChains = 4;

// The kSumChains vectors of channels from c0 of one input pixel, summed over
// its n_windows windows (at `offset`, selected where the argmax is `tap`);
// with kCopy, the value of the last window that selects it (unpool).
// kFull: all of them whole, so the sums stay in registers. The lanes are
// sums rounded to T, or T values, so they store exactly.
// kCount: the lanes that select their tap are counted in `selected`.
template <typename T, bool kFull, bool kCopy, bool kCount>
inline void gather_pixel(const T* go, const uint8_t* argmax, T* gi_px, int64_t C, int64_t c0,
                         const int64_t* offset, const int64_t* tap, int64_t n_windows,
                         bool stream, TapCounts& selected) {
  Vec sum[kSumChains];
  for (Vec& s : sum) s = Vec(0.f);
  const auto lanes = [&](int64_t j) {
    return kFull ? kLanes : std::min(kLanes, C - c0 - j * kLanes);
  };
  for (int64_t k = 0; k < n_windows; ++k) {
    for (int64_t j = 0; j < kSumChains; ++j) {
      const int64_t n = lanes(j), o = offset[k] + c0 + j * kLanes;
      if (!kFull && n <= 0) break;
      const ArgmaxLanes am = load_argmax_lanes(argmax + o, n);
      if constexpr (kCount) selected.add(am, tap[k], n);
      if constexpr (kCopy) {
        sum[j] = copy_where(sum[j], am, tap[k], load_float(go + o, n));
      } else {
        // the sum starts at +0, so +0 + -0 gives +0 as torch's does, and the
        // first add is exact
        sum[j] = add_where(sum[j], am, tap[k], load_float(go + o, n));
        if (k > 0) sum[j] = round_to<T>(sum[j]);
      }
    }
  }
  for (int64_t j = 0; j < kSumChains && lanes(j) > 0; ++j) {
    store_lanes(gi_px + c0 + j * kLanes, sum[j], lanes(j), stream);
  }
}

// channels_last, any geometry (volumes depth-folded: geometry.h): each input
// pixel gathers, kLanes channels at a time, from the windows covering it in
// output order (listed once per pixel, so the channel loop does no index
// arithmetic); a 16-bit sum rounds to T after every add, as torch's CPU
// kernel adds into the element type.
//
// In planes each output row's argmax is checked by the input row of its
// windows' first in-bounds tap row, as that row starts to read it; rows of
// windows with no row inside the input (dilation + padding) are read by none,
// so such a geometry, and any volume of stepping windows, is checked in a
// pass first. Adaptive windows count the lanes that select instead.
template <typename T, bool kCopy = false>
void backward_channels_last(const FastBackwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const int64_t C = a.in_l.c;
  const T* go = static_cast<const T*>(a.grad_output);
  T* gi = static_cast<T*>(a.grad_input);
  const int64_t rows = a.in_l.n * a.in_l.h;  // a.in_l.h: in_d * in_h
  const AxisT<int64_t> axis_d = g.axis_d(), axis_h = g.axis_h(), axis_w = g.axis_w();
  const bool planar = g.planar();
  std::optional<ArgmaxRule> rule;  // of windows that step
  if (planar && !g.adaptive()) rule.emplace(g);
  const bool check_rows = rule && !rule->any_row_empty();
  // Adaptive windows lie inside the input, and each value of a valid argmax
  // is selected by one input: the selections are counted, not checked first.
  const bool counts = g.adaptive();
  if (!check_rows && !counts && !argmax_valid(a.argmax, false, a.out_l, g)) {
    a.argmax_invalid->store(true);
    return;
  }
  // Each pixel starts a cache line, so that lines are streamed whole. Only
  // float: 16-bit sums, half the bytes for the same arithmetic, measured
  // slower streamed. Not adaptive windows' gradients: a head's small input,
  // which stays in the cache for the op that reads it next, and measured
  // slower streamed.
  const bool stream = std::is_same_v<T, float> && C % 16 == 0 && !g.adaptive() &&
                      worth_streaming(gi, a.in_l.numel());
  const AxisCover cols(axis_w);
  std::atomic<int64_t> selected_all{0};
  const auto gather_rows = [&](auto count) {
    at::parallel_for(0, rows, grain_for(g.in_w * C), [&](int64_t b, int64_t e) {
      TapCounts selected;
      // kernel_h * kernel_w <= 256 with a uint8 argmax, and adaptive windows
      // cover an input at most twice along an axis: no list overflows
      std::array<int64_t, 256> row_offset, row_tap, offset, tap;
      for (int64_t r = b; r < e; ++r) {
        const int64_t slab = r / g.in_h, ih = r % g.in_h;  // slab: image * in_d + id
        const TapRange ohs = axis_h.covering(ih);
        int64_t n_rows = 0;  // rows of windows covering row r, in output order
        // those of output slice o_slice (image * out_d + od), tap kd
        const auto add_rows = [&](int64_t o_slice, int64_t kd) {
          for (int64_t oh = ohs.begin; oh < ohs.end; ++oh) {
            const int64_t kh = axis_h.tap(ih, oh);
            if (kh < 0) continue;
            const int64_t o_row = (o_slice * g.out_h + oh) * g.out_w * C;
            if (check_rows && kh == rule->first_row_tap(oh) &&
                !rule->row_valid(a.argmax + o_row, C, oh)) {
              a.argmax_invalid->store(true, std::memory_order_relaxed);
            }
            row_offset[n_rows] = o_row;
            row_tap[n_rows++] = (kd * g.kernel_h + kh) * g.kernel_w;
          }
        };
        if (planar) {
          add_rows(slab, 0);
        } else {
          const int64_t id = slab % g.in_d, image = slab / g.in_d;
          const TapRange ods = axis_d.covering(id);
          for (int64_t od = ods.begin; od < ods.end; ++od) {
            const int64_t kd = axis_d.tap(id, od);
            if (kd >= 0) add_rows(image * g.out_d + od, kd);
          }
        }
        for (int64_t iw = 0; iw < g.in_w; ++iw) {
          int64_t n_windows = 0;
          for (int64_t i = 0; i < n_rows; ++i) {
            for (int64_t k = cols.first[iw]; k < cols.first[iw + 1]; ++k) {
              offset[n_windows] = row_offset[i] + cols.window[k] * C;
              tap[n_windows++] = row_tap[i] + cols.tap[k];
            }
          }
          T* gi_px = gi + (r * g.in_w + iw) * C;
          int64_t c0 = 0;
          for (; c0 + kSumChains * kLanes <= C; c0 += kSumChains * kLanes) {
            gather_pixel<T, true, kCopy, decltype(count)::value>(
                go, a.argmax, gi_px, C, c0, offset.data(), tap.data(), n_windows, stream,
                selected);
          }
          if (c0 < C) {
            gather_pixel<T, false, kCopy, decltype(count)::value>(
                go, a.argmax, gi_px, C, c0, offset.data(), tap.data(), n_windows, stream,
                selected);
          }
        }
      }
      if (stream) stream_fence();
      selected_all += selected.total();
    });
  };
  if (counts) {
    gather_rows(std::true_type{});
    if (selected_all != a.out_l.numel()) a.argmax_invalid->store(true);
  } else {
    gather_rows(std::false_type{});
  }
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
