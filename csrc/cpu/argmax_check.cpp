// The argmax checks of argmax_check.h that run as a pass of their own.
#include "argmax_check.h"

#include <ATen/Parallel.h>

#include <atomic>

namespace poolx {
namespace {

using namespace isa_none;

// A volume's argmax value by value, and that of adaptive windows: the rule's
// tables are those of planes of windows that step.
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

template <typename argmax_t>
bool valid(const argmax_t* argmax, const Layout4d& l, const Pool2dGeometry& g) {
  if (!g.planar() || g.adaptive()) return volume_valid(argmax, l, g);
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
