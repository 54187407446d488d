// The scatter of few windows a plane (NCDHW) or image (channels_last_3d),
// by a table of where each tap of each window lands: adaptive heads and
// pyramids, global pooling, the last small planes of a network. Other paths
// pay per plane or per row more than such a plane's few windows cost.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "isa_namespace.h"
#include "poolx/geometry.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// One axis of the windows (stepping or adaptive): where each starts and
// which of its taps lie inside the input, worked out once per call instead of
// once per window.
struct AxisWindows {
  // held inline up to a few windows: small calls make no allocation
  template <typename E>
  using Windows = c10::SmallVector<E, 16>;
  Windows<int64_t> start;
  Windows<TapRange> taps;
  Windows<char> whole, empty;  // every tap of the kernel inside; none

  explicit AxisWindows(const AxisT<int64_t>& axis) {
    for (int64_t o = 0; o < axis.out; ++o) {
      start.push_back(axis.start(o));
      taps.push_back(axis.taps(o, start.back()));
      whole.push_back(taps.back().begin == 0 && taps.back().end == axis.kernel);
      empty.push_back(taps.back().begin >= taps.back().end);
    }
  }

  bool any_empty() const { return std::find(empty.begin(), empty.end(), 1) != empty.end(); }
};

// Zeroes bytes from p by vector stores, which leave a run or chunk of
// groups in the L1 cache for its writes (glibc's memset stores a few KB by
// rep stosb).
inline void zero_bytes(void* p, int64_t bytes) {
  using IVec = at::vec::Vectorized<int32_t>;
  constexpr int64_t kBytes = IVec::size() * sizeof(int32_t);
  char* const dst = static_cast<char*>(p);
  int64_t i = 0;
  for (; i + kBytes <= bytes; i += kBytes) IVec(0).store(dst + i);
  std::memset(dst + i, 0, bytes - i);
}

// Where each tap lands for a chunk of groups: entry[j * row + a] is the
// element (channel 0) at tap a of the chunk's window j (group j / windows),
// or kInvalid where the tap lies outside the window or the input. A 1-byte
// argmax of few windows indexes a row of 256 as it is (`direct`); others
// read entry `row - 1`, kInvalid in every window, for a value above the
// taps or negative. One lookup places a window's value and checks it: no
// split of the tap number, no compare per axis, no loop per group. kInvalid
// is element 0 marked by its top bit: the scatter writes there, in bounds,
// without a branch, and reports the mark.
class WindowTable {
 public:
  static constexpr uint32_t kInvalid = uint32_t{1} << 31, kElement = kInvalid - 1;

  // Groups a chunk holds: as many as fit kChunkBytes, fewer where the table
  // would outgrow kMaxEntries. 0 where not even one fits, where a window has
  // no tap inside the input (any value is valid there, and writes nothing),
  // or where there is no window.
  static int64_t chunk_groups(const Pool2dGeometry& g, const AxisWindows (&axes)[3],
                              int64_t in_group, int64_t elem_size, bool byte_argmax) {
    const int64_t entries = g.out_d * g.out_h * g.out_w * row_of(g, byte_argmax);
    if (entries == 0 || in_group == 0 || axes[0].any_empty() || axes[1].any_empty() ||
        axes[2].any_empty()) {
      return 0;
    }
    const int64_t by_bytes = std::max<int64_t>(1, kChunkBytes / (in_group * elem_size));
    const int64_t groups = std::min(by_bytes, kMaxEntries / entries);
    return groups * in_group < kInvalid ? groups : 0;
  }

  WindowTable(const Pool2dGeometry& g, const AxisWindows (&axes)[3], int64_t C, int64_t groups,
              bool byte_argmax)
      : row(row_of(g, byte_argmax)), windows(g.out_d * g.out_h * g.out_w),
        direct(row == 256 && byte_argmax), entry(groups * windows * row, kInvalid) {
    const auto& [ds, hs, ws] = axes;
    uint32_t* at = entry.data();
    // the first group's windows, tap by tap inside each
    for (int64_t od = 0; od < g.out_d; ++od) {
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        for (int64_t ow = 0; ow < g.out_w; ++ow, at += row) {
          const TapRange td = ds.taps[od], th = hs.taps[oh], tw = ws.taps[ow];
          for (int64_t kd = td.begin; kd < td.end; ++kd) {
            const int64_t d = ds.start[od] + kd * g.dilation_d;
            for (int64_t kh = th.begin; kh < th.end; ++kh) {
              const int64_t h = hs.start[oh] + kh * g.dilation_h;
              for (int64_t kw = tw.begin; kw < tw.end; ++kw) {
                const int64_t w = ws.start[ow] + kw * g.dilation_w;
                at[(kd * g.kernel_h + kh) * g.kernel_w + kw] =
                    static_cast<uint32_t>(((d * g.in_h + h) * g.in_w + w) * C);
              }
            }
          }
        }
      }
    }
    // the others: the first's, a group further on (built per call, so cheaply)
    const int64_t group_entries = windows * row;
    const auto in_group = static_cast<uint32_t>(g.in_d * g.in_h * g.in_w * C);
    for (int64_t i = group_entries; i < groups * group_entries; ++i) {
      const uint32_t first = entry[i - group_entries];
      entry[i] = first == kInvalid ? kInvalid : first + in_group;
    }
  }

  // The entry of argmax value a in its window's row.
  template <bool kDirect, typename argmax_t>
  int64_t tap(argmax_t a) const {
    if constexpr (kDirect && std::is_same_v<argmax_t, uint8_t>) return a;
    return static_cast<int64_t>(std::min<uint64_t>(static_cast<uint64_t>(a), row - 1));
  }

  const int64_t row, windows;
  const bool direct;
  std::vector<uint32_t> entry;

 private:
  // Rows of 256 for planes of up to 16 windows, whose rows then stay small.
  static int64_t row_of(const Pool2dGeometry& g, bool byte_argmax) {
    const bool direct = byte_argmax && g.out_d * g.out_h * g.out_w * 256 <= kDirectMaxEntries;
    return direct ? 256 : g.window_size() + 1;
  }

  static constexpr int64_t kDirectMaxEntries = 4096;
  // A chunk's groups stay in the L1 cache from their zeroing to their writes.
  static constexpr int64_t kChunkBytes = 16 * 1024;
  // 32 KB: the table stays in the L1 or L2 cache beside the groups written.
  static constexpr int64_t kMaxEntries = 8192;
};

// Each window's value placed at its argmax's tap of `to`, by a WindowTable:
// place(at, o) writes window o's value (or mark) at `at`. Groups of in_group
// elements (zeroed here), out_group windows' values each, `channels` a
// window, or one (kPlanes: known to the compiler, with no channel loop).
// False where an argmax names no tap of its window inside the input.
template <bool kPlanes, typename T, typename argmax_t, typename Place>
bool scatter_by_table(const argmax_t* argmax, T* to, const WindowTable& table, int64_t chunk,
                      int64_t groups, int64_t in_group, int64_t out_group, int64_t channels,
                      const Place& place) {
  const int64_t C = kPlanes ? 1 : channels;
  std::atomic<bool> invalid{false};
  const auto run = [&](auto direct) {
    at::parallel_for(0, groups, chunk, [&](int64_t begin, int64_t end) {
      const uint32_t* const entry = table.entry.data();
      const int64_t row = table.row;
      uint32_t marks = 0;
      for (int64_t first = begin; first < end && marks < WindowTable::kInvalid;
           first += chunk) {
        const int64_t groups_here = std::min(end - first, chunk);
        T* const dst = to + first * in_group;
        zero_bytes(dst, groups_here * in_group * static_cast<int64_t>(sizeof(T)));
        const int64_t o0 = first * out_group;
        for (int64_t j = 0, n = groups_here * table.windows; j < n; ++j) {
          const uint32_t* const taps = entry + j * row;
          for (int64_t c = 0, o = o0 + j * C; c < C; ++c, ++o) {
            const uint32_t at = taps[table.tap<decltype(direct)::value>(argmax[o])];
            marks |= at;
            place(dst + (at & WindowTable::kElement) + c, o);
          }
        }
      }
      if (marks >= WindowTable::kInvalid) invalid.store(true, std::memory_order_relaxed);
    });
  };
  if (table.direct) {
    run(std::true_type{});
  } else {
    run(std::false_type{});
  }
  return !invalid;
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
