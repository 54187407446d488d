// Where each pooled element goes, for the scatter (scatter.cpp): Targets
// place a group of pooled elements: `pixels` windows from (ph, pw), `channels`
// elements each (element j = i * channels + c is channel c of window
// (ph, pw + i)). Each checks the group's keys, then calls zero_until(p) with p
// at least the furthest pixel it will place at, then places each element that
// lands in the plane, in order: place(j, c, pixel) one at a time, or
// place.pixels(t, pixels, channels) with every target in t.
#pragma once

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "argmax_check.h"
#include "tap_table.h"

namespace poolx {
namespace scatter_targets {

using isa_none::ArgmaxRule;
using isa_none::TapTable;

[[noreturn]] inline C10_NOINLINE void invalid_unpool_index(int64_t index, int64_t out_h, int64_t out_w) {
  TORCH_CHECK(false, "max_unpool2d: Found an invalid max index: ", index,
              " (output volumes are of size ", out_h, "x", out_w, ")");
}

// The largest of t[0, n) as unsigned (a negative compares as huge), four
// running maxima so that no compare waits for the one before.
inline uint64_t unsigned_max(const int64_t* t, int64_t n) {
  uint64_t m[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (int k = 0; k < 4; ++k) m[k] = std::max(m[k], static_cast<uint64_t>(t[j + k]));
  }
  for (; j < n; ++j) m[0] = std::max(m[0], static_cast<uint64_t>(t[j]));
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

// Targets from torch's int64 flat indices, each checked against the plane.
struct IndexTargets {
  const int64_t* indices;
  int64_t out_h, out_w;

  void start_row(int64_t, int64_t, int64_t) const {}  // checked per group below

  template <typename ZeroUntil, typename Place>
  void operator()(int64_t, int64_t, int64_t pixels, int64_t channels, int64_t offset,
                  const ZeroUntil& zero_until, const Place& place) const {
    const int64_t* t = indices + offset;
    const int64_t n = pixels * channels;
    // the indices are the widest stream and the stores leave the hardware
    // prefetcher little room: fetch them 8 KiB ahead
    for (int64_t j = 0; j < n; j += 8) __builtin_prefetch(t + 1024 + j);
    const uint64_t most = unsigned_max(t, n);
    if (C10_UNLIKELY(most >= static_cast<uint64_t>(out_h * out_w))) {
      for (int64_t j = 0; j < n; ++j) {
        if (static_cast<uint64_t>(t[j]) >= static_cast<uint64_t>(out_h * out_w)) {
          invalid_unpool_index(t[j], out_h, out_w);
        }
      }
    }
    zero_until(static_cast<int64_t>(most));
    place.pixels(t, pixels, channels);
  }
};

// Targets from the compact argmax: the selected tap of each window; a window
// with no tap inside the input places nothing. A group holding a value that
// names no tap of its window inside the input (argmax_check.h) sets *invalid
// and places nothing, as the tap table trusts the values it looks up: each
// row of windows is checked as it starts (NCHW: a block of rows). A window
// adds its tap's offset in the plane to its first tap's pixel; only windows
// at the border of a dilated pooling, or with an int32 argmax, check rows and
// columns.
template <typename argmax_t>
struct ArgmaxTargets {
  const argmax_t* argmax;
  Pool2dGeometry g;
  const TapTable* taps;  // null: an int32 argmax, decoded by division
  const ArgmaxRule* rule;
  std::atomic<bool>* invalid;
  mutable bool row_valid = true;

  // window row ph, its values from `offset`, `channels` a window
  void start_row(int64_t ph, int64_t offset, int64_t channels) const {
    if (channels > 1) {
      row_valid = rule->row_valid(argmax + offset, channels, ph);
    } else if (ph % rule->nchw_check_rows() == 0) {
      row_valid = rule->nchw_rows_valid(argmax + offset, ph);
    }
  }

  template <typename ZeroUntil, typename Place>
  void operator()(int64_t ph, int64_t pw, int64_t pixels, int64_t channels, int64_t offset,
                  const ZeroUntil& zero_until, const Place& place) const {
    const argmax_t* a = argmax + offset;
    const int64_t h0 = ph * g.stride_h - g.pad_h;
    // the windows lying inside the input: [begin, end)
    int64_t begin = 0, end = 0;
    if (taps != nullptr && rule->whole_row(ph)) {
      const TapRange inside = rule->interior_cols();
      begin = std::clamp<int64_t>(inside.begin - pw, 0, pixels);
      end = std::clamp<int64_t>(inside.end - pw, begin, pixels);
    }
    if (!row_valid) {
      invalid->store(true, std::memory_order_relaxed);
      return;
    }
    // the last tap of the last window
    zero_until((h0 + (g.kernel_h - 1) * g.dilation_h) * g.in_w +
               (pw + pixels - 1) * g.stride_w - g.pad_w + (g.kernel_w - 1) * g.dilation_w);
    // Without dilation every window has a tap inside the input, and the
    // checked argmax names one: its offset from the window's first tap, as
    // inside, lands in the plane (no division per window).
    const bool undilated = taps != nullptr && g.dilation_h == 1 && g.dilation_w == 1;
    const auto border = [&](int64_t i) {
      if (undilated) {
        const int64_t first_tap = h0 * g.in_w + (pw + i) * g.stride_w - g.pad_w;
        for (int64_t c = 0; c < channels; ++c) {
          const auto tap = static_cast<uint8_t>(a[i * channels + c]);
          place(i * channels + c, c, first_tap + taps->offset[tap]);
        }
        return;
      }
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t v = static_cast<int64_t>(a[i * channels + c]);
        const int64_t h = h0 + v / g.kernel_w * g.dilation_h;
        const int64_t w = (pw + i) * g.stride_w - g.pad_w + v % g.kernel_w * g.dilation_w;
        if (h >= 0 && h < g.in_h && w >= 0 && w < g.in_w) place(i * channels + c, c, h * g.in_w + w);
      }
    };
    for (int64_t i = 0; i < begin; ++i) border(i);
    const int64_t row = h0 * g.in_w - g.pad_w;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t first_tap = row + (pw + i) * g.stride_w;
      for (int64_t c = 0; c < channels; ++c) {
        place(i * channels + c, c, first_tap + taps->offset[static_cast<uint8_t>(a[i * channels + c])]);
      }
    }
    for (int64_t i = end; i < pixels; ++i) border(i);
  }
};

// One task: `channels` planes whose element (pixel p, channel j) lies at
// p * channels + j, in the pooled tensor and in the output (NCHW: one plane;
// channels_last: an image).
// Elements move as bits (bits_t: an unsigned type of their size), so NaN
// payloads and -0.0 stay as they are; `values` null stores `fill`.
//
// The zero-fill is folded into the scatter: the task zeroes its output only
// up to the furthest pixel written so far (a block at a time), so each output
// line is zeroed just before it is written and leaves the cache once, instead
// of a whole-output fill that the scatter reads back. Stores go in row-major
// order within each plane, so the last one wins (torch's CPU unpool on one
// thread) on any number of threads.
}  // namespace scatter_targets
}  // namespace poolx
