// The argmax checks of argmax_check.h that run as a pass of their own.
#include "argmax_check.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>

namespace poolx {
namespace {

using namespace isa_none;

// Adaptive windows' argmax value by value: the rule's tables are those of
// windows that step.
template <typename argmax_t>
bool volume_valid(const argmax_t* argmax, const Layout4d& l, const Pool2dGeometry& g) {
  std::atomic<bool> ok{true};
  at::parallel_for(0, l.numel(), 32768, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e && ok.load(std::memory_order_relaxed); ++i) {
      const Layout4d::Coord p = l.coord(i);
      if (!argmax_is_valid(static_cast<int64_t>(argmax[i]), g, p.h, p.w)) ok = false;
    }
  });
  return ok;
}

// Whether a[0, n) name taps of the box ds x hs x ws of their window (a
// window with no tap inside the input accepts any value below the taps):
// uint8 values split into (kd, kh, kw) by multiplies and shifts, which
// vectorize (v / d == (v * ceil(65536 / d)) >> 16 for v, d <= 256).
template <typename argmax_t>
bool in_box(const argmax_t* a, int64_t n, const Pool2dGeometry& g, TapRange ds, TapRange hs,
            TapRange ws) {
  const int64_t taps = g.window_size();
  const auto empty = [](TapRange r) { return r.begin >= r.end; };
  const auto whole = [](TapRange r, int64_t kernel) { return r.begin == 0 && r.end == kernel; };
  if (empty(ds) || empty(hs) || empty(ws) ||
      (whole(ds, g.kernel_d) && whole(hs, g.kernel_h) && whole(ws, g.kernel_w))) {
    return all_below(a, n, taps);
  }
  const int64_t plane = g.kernel_h * g.kernel_w, kw_n = g.kernel_w;
  if constexpr (sizeof(argmax_t) == 1) {
    // unsigned: k - begin >= count also where k < begin; past the taps,
    // kd >= kernel_d >= ds.end
    const uint32_t db = ds.begin, dn = ds.end - ds.begin, hb = hs.begin, hn = hs.end - hs.begin;
    const uint32_t wb = ws.begin, wn = ws.end - ws.begin;
    const uint32_t plane32 = plane, kw32 = kw_n;
    const uint32_t plane_mul = (65536 + plane32 - 1) / plane32, w_mul = (65536 + kw32 - 1) / kw32;
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t v = a[i], kd = (v * plane_mul) >> 16, rest = v - kd * plane32;
      const uint32_t kh = (rest * w_mul) >> 16, kw = rest - kh * kw32;
      bad |= static_cast<uint32_t>(kd - db >= dn) | static_cast<uint32_t>(kh - hb >= hn) |
             static_cast<uint32_t>(kw - wb >= wn);
    }
    return bad == 0;
  } else {
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = a[i], kd = v / plane, kh = v % plane / kw_n, kw = v % kw_n;
      ok &= v >= 0 && v < taps && kd >= ds.begin && kd < ds.end && kh >= hs.begin &&
            kh < hs.end && kw >= ws.begin && kw < ws.end;
    }
    return ok;
  }
}

// A volume of windows that step, a row of windows (od, oh) at a time.
template <typename argmax_t>
bool volume_rows_valid(const argmax_t* argmax, const Layout4d& l, const Pool2dGeometry& g) {
  const int64_t channels = l.channels_last ? l.c : 1;
  const int64_t row_len = l.w * channels, rows = l.numel() / row_len;
  const auto taps_of = [](int64_t o, int64_t kernel, int64_t stride, int64_t pad,
                          int64_t dilation, int64_t in) {
    return window_taps(o * stride - pad, kernel, dilation, in);
  };
  const TapRange cols =
      interior_outputs(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w);
  const int64_t inner_begin = std::clamp<int64_t>(cols.begin, 0, l.w);
  const int64_t inner_end = std::clamp<int64_t>(cols.end, inner_begin, l.w);
  std::atomic<bool> ok{true};
  at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / row_len), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e && ok.load(std::memory_order_relaxed); ++r) {
      const int64_t row = r % l.h, od = row / g.out_h, oh = row % g.out_h;
      const TapRange ds = taps_of(od, g.kernel_d, g.stride_d, g.pad_d, g.dilation_d, g.in_d);
      const TapRange hs = taps_of(oh, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h, g.in_h);
      const argmax_t* a = argmax + r * row_len;
      bool row_ok = in_box(a + inner_begin * channels, (inner_end - inner_begin) * channels, g,
                           ds, hs, {0, g.kernel_w});
      for (int64_t ow = 0; ow < l.w && row_ok; ow = ow + 1 == inner_begin ? inner_end : ow + 1) {
        row_ok = in_box(a + ow * channels, channels, g, ds, hs,
                        taps_of(ow, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w, g.in_w));
      }
      if (!row_ok) ok = false;
    }
  });
  return ok;
}

template <typename argmax_t>
bool valid(const argmax_t* argmax, const Layout4d& l, const Pool2dGeometry& g) {
  if (g.adaptive()) return volume_valid(argmax, l, g);
  if (!g.planar()) return volume_rows_valid(argmax, l, g);
  // an output row: out_w windows, of C values each in channels_last
  const int64_t channels = l.channels_last ? l.c : 1;
  const int64_t row_len = l.w * channels, rows = l.numel() / row_len;
  const ArgmaxRule rule(g);
  std::atomic<bool> ok{true};
  at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / row_len), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e && ok.load(std::memory_order_relaxed); ++r) {
      if (!rule.row_valid(argmax + r * row_len, channels, r % l.h)) ok = false;
    }
  });
  return ok;
}

template <typename argmax_t>
int64_t first_invalid(const argmax_t* argmax, const Layout4d& l, const Pool2dGeometry& g) {
  for (int64_t i = 0; i < l.numel(); ++i) {
    const Layout4d::Coord p = l.coord(i);
    if (!argmax_is_valid(static_cast<int64_t>(argmax[i]), g, p.h, p.w)) return i;
  }
  return -1;
}

}  // namespace

bool argmax_valid(const void* argmax, bool int32, const Layout4d& l, const Pool2dGeometry& g) {
  if (l.numel() == 0) return true;
  return int32 ? valid(static_cast<const int32_t*>(argmax), l, g)
               : valid(static_cast<const uint8_t*>(argmax), l, g);
}

int64_t first_invalid_argmax(const void* argmax, bool int32, const Layout4d& l,
                             const Pool2dGeometry& g) {
  return int32 ? first_invalid(static_cast<const int32_t*>(argmax), l, g)
               : first_invalid(static_cast<const uint8_t*>(argmax), l, g);
}

}  // namespace poolx
