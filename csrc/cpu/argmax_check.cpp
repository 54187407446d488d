// The argmax checks of argmax_check.h that run as a pass of their own.
#include "argmax_check.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <vector>

namespace poolx {
namespace {

using namespace isa_none;

// Windows that step or adapt, along up to three axes: which taps of each window lie
// inside the input, a box ds x hs x ws of per-axis ranges. A uint8 value
// splits into (kd, kh, kw) by multiplies and shifts, which vectorize
// (v / d == (v * ceil(65536 / d)) >> 16 for v, d <= 256).
class TapBoxes {
 public:
  explicit TapBoxes(const Pool2dGeometry& g)
      : g_(g), taps_(g.window_size()), plane_(g.kernel_h * g.kernel_w),
        plane_mul_(static_cast<uint32_t>((65536 + plane_ - 1) / plane_)),
        w_mul_(static_cast<uint32_t>((65536 + g.kernel_w - 1) / g.kernel_w)),
        ds_(axis(g.axis_d())), hs_(axis(g.axis_h())), ws_(axis(g.axis_w())) {}

  TapRange d(int64_t od) const { return ds_[od]; }
  TapRange h(int64_t oh) const { return hs_[oh]; }
  TapRange w(int64_t ow) const { return ws_[ow]; }

  // Whether a[0, n), values of windows of taps ds x hs x ws, name such taps
  // (a window with no tap inside the input accepts any value below the taps).
  template <typename argmax_t>
  bool valid(const argmax_t* a, int64_t n, TapRange ds, TapRange hs, TapRange ws) const {
    const auto empty = [](TapRange r) { return r.begin >= r.end; };
    const auto whole = [](TapRange r, int64_t k) { return r.begin == 0 && r.end == k; };
    if (empty(ds) || empty(hs) || empty(ws) ||
        (whole(ds, g_.kernel_d) && whole(hs, g_.kernel_h) && whole(ws, g_.kernel_w))) {
      return all_below(a, n, taps_);
    }
    if constexpr (sizeof(argmax_t) == 1) {
      // unsigned: k - begin >= count also where k < begin; past the taps,
      // kd >= kernel_d >= ds.end
      const uint32_t db = ds.begin, dn = ds.end - ds.begin, hb = hs.begin, hn = hs.end - hs.begin;
      const uint32_t wb = ws.begin, wn = ws.end - ws.begin;
      const uint32_t plane = plane_, kw_n = g_.kernel_w, plane_mul = plane_mul_, w_mul = w_mul_;
      uint32_t bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t v = a[i], kd = (v * plane_mul) >> 16, rest = v - kd * plane;
        const uint32_t kh = (rest * w_mul) >> 16, kw = rest - kh * kw_n;
        bad |= static_cast<uint32_t>(kd - db >= dn) | static_cast<uint32_t>(kh - hb >= hn) |
               static_cast<uint32_t>(kw - wb >= wn);
      }
      return bad == 0;
    } else {
      bool ok = true;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = a[i], kd = v / plane_, kh = v % plane_ / g_.kernel_w;
        const int64_t kw = v % g_.kernel_w;
        ok &= v >= 0 && v < taps_ && kd >= ds.begin && kd < ds.end && kh >= hs.begin &&
              kh < hs.end && kw >= ws.begin && kw < ws.end;
      }
      return ok;
    }
  }

 private:
  static std::vector<TapRange> axis(const AxisT<int64_t>& axis) {
    std::vector<TapRange> taps;
    for (int64_t o = 0; o < axis.out; ++o) taps.push_back(axis.taps(o, axis.start(o)));
    return taps;
  }

  Pool2dGeometry g_;
  int64_t taps_, plane_;
  uint32_t plane_mul_, w_mul_;
  std::vector<TapRange> ds_, hs_, ws_;
};

// Volumes, and adaptive windows, a row of windows (od, oh) at a time: the
// windows that step inside the input along W as one run, the others (every
// adaptive one) one by one.
template <typename argmax_t>
bool rows_of_boxes_valid(const argmax_t* argmax, const Layout4d& l, const Pool2dGeometry& g) {
  const int64_t channels = l.channels_last ? l.c : 1;
  const int64_t row_len = l.w * channels, rows = l.numel() / row_len;
  const TapBoxes boxes(g);
  const TapRange cols =
      g.adaptive()
          ? TapRange{0, 0}
          : interior_outputs(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w);
  const int64_t inner_begin = std::clamp<int64_t>(cols.begin, 0, l.w);
  const int64_t inner_end = std::clamp<int64_t>(cols.end, inner_begin, l.w);
  std::atomic<bool> ok{true};
  at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / row_len), [&](int64_t b, int64_t e) {
    // (od, oh) of row b, stepped along without a division per row
    int64_t od = b % l.h / g.out_h, oh = b % l.h % g.out_h;
    for (int64_t r = b; r < e && ok.load(std::memory_order_relaxed); ++r) {
      const TapRange ds = boxes.d(od), hs = boxes.h(oh);
      const argmax_t* a = argmax + r * row_len;
      bool row_ok = boxes.valid(a + inner_begin * channels,
                                (inner_end - inner_begin) * channels, ds, hs, {0, g.kernel_w});
      const auto edge = [&](int64_t ow) {
        return boxes.valid(a + ow * channels, channels, ds, hs, boxes.w(ow));
      };
      for (int64_t ow = 0; ow < inner_begin && row_ok; ++ow) row_ok = edge(ow);
      for (int64_t ow = inner_end; ow < l.w && row_ok; ++ow) row_ok = edge(ow);
      if (!row_ok) ok = false;
      if (++oh == g.out_h) {
        oh = 0;
        if (++od == g.out_d) od = 0;
      }
    }
  });
  return ok;
}

template <typename argmax_t>
bool valid(const argmax_t* argmax, const Layout4d& l, const Pool2dGeometry& g) {
  if (g.adaptive() || !g.planar()) return rows_of_boxes_valid(argmax, l, g);
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
