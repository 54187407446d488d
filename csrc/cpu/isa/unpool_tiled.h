// Unpool in channels_last where windows tile the output: each output element
// lies in at most one window, so it is that window's value where the window
// selected it and zero elsewhere. One pass writes every output element once, in order: no
// zero-fill, no scatter, deterministic. Serves unpool by int64 indices (a
// window selects the output element whose flat position its index names),
// unpool by argmax and the mask (a window selects its argmax tap). Elements
// move as unsigned integers of their size, so one instantiation serves every
// dtype of that size and the bits (NaN payloads, -0.0) stay as they are.
// Written plainly, a window's channels in the innermost loop, for the
// compiler to vectorize: a tap's channels are contiguous in the output.
//
// Every key is checked to name an element of its own window; where one does
// not, the kernel stops and returns false, and the caller runs the general
// scatter (which also raises the errors). With indices the windows are only a
// hypothesis (the op has no kernel size): the result is exact whenever every
// index lies in its window, whatever pooling made the indices.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "../fast_paths.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// Channels checked together, their `found` flags kept on the stack.
constexpr int64_t kUnpoolBlock = 256;

template <typename Bits, typename Key, bool kMask>
struct UnpoolTiledKernel {
  const TiledUnpoolArgs& a;
  const Bits* values;
  const Key* keys;
  Bits* out;
  static constexpr bool kByIndex = std::is_same_v<Key, int64_t>;

  // What the key of the window at `ow` must equal to select tap (kh, kw).
  int64_t wanted(int64_t oh, int64_t ow, int64_t kh, int64_t kw) const {
    return kByIndex ? (oh * a.kernel_h + kh) * a.out_w + ow * a.kernel_w + kw
                    : kh * a.kernel_w + kw;
  }

  // All ones where hit, else zero: the selection as arithmetic, which the
  // compiler vectorizes (a conditional load it does not).
  static Bits ones_if(bool hit) { return Bits(0) - static_cast<Bits>(hit); }
  static Bits value_of(const Bits* v, int64_t j) { return kMask ? Bits(1) : v[j]; }

  // channels_last: n channels of one tap, contiguous.
  static void route_channels(const Key* k, const Bits* v, Bits* dst, int64_t n, Key want,
                             uint8_t* found) {
    for (int64_t j = 0; j < n; ++j) {
      const bool hit = k[j] == want;
      dst[j] = value_of(v, j) & ones_if(hit);
      found[j] |= static_cast<uint8_t>(hit);
    }
  }

  static bool all_found(const uint8_t* found, int64_t n) {
    uint8_t all = 1;
    for (int64_t j = 0; j < n; ++j) all &= found[j];
    return all != 0;
  }

  // channels_last: each tap's channels, a block of channels at a time.
  bool window_row(int64_t img, int64_t oh) const {
    const int64_t C = a.channels, kh_n = a.kernel_h, kw_n = a.kernel_w;
    Bits* rows = out + (img * a.out_h + oh * kh_n) * a.out_w * C;
    uint8_t found[kUnpoolBlock];
    for (int64_t ow = 0; ow < a.pooled_w; ++ow) {
      const int64_t first = ((img * a.pooled_h + oh) * a.pooled_w + ow) * C;
      for (int64_t c0 = 0; c0 < C; c0 += kUnpoolBlock) {
        const int64_t n = std::min(kUnpoolBlock, C - c0);
        std::fill_n(found, n, uint8_t{0});
        for (int64_t kh = 0; kh < kh_n; ++kh) {
          for (int64_t kw = 0; kw < kw_n; ++kw) {
            route_channels(keys + first + c0, kMask ? nullptr : values + first + c0,
                           rows + (kh * a.out_w + ow * kw_n + kw) * C + c0, n,
                           static_cast<Key>(wanted(oh, ow, kh, kw)), found);
          }
        }
        if (!all_found(found, n)) return false;
      }
    }
    return true;
  }

  // Zeros where no window reaches: the columns right of the last window in
  // the window row's output rows, and (last window row) the rows below.
  void zero_uncovered(int64_t img, int64_t oh) const {
    const int64_t C = a.channels, row = a.out_w * C, covered = a.pooled_w * a.kernel_w * C;
    const int64_t h_end = oh + 1 == a.pooled_h ? a.out_h : (oh + 1) * a.kernel_h;
    for (int64_t h = oh * a.kernel_h; h < h_end; ++h) {
      const int64_t from = h < a.pooled_h * a.kernel_h ? covered : 0;
      std::fill(out + (img * a.out_h + h) * row + from, out + (img * a.out_h + h + 1) * row,
                Bits(0));
    }
  }

  bool run() const {
    std::atomic<bool> failed{false};
    const int64_t window_rows = a.n * a.pooled_h;
    const int64_t per_row = a.out_w * a.channels * a.kernel_h;
    at::parallel_for(0, window_rows, std::max<int64_t>(1, 16384 / per_row),
                     [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end && !failed.load(std::memory_order_relaxed); ++r) {
        const int64_t img = r / a.pooled_h, oh = r % a.pooled_h;
        if (!window_row(img, oh)) failed.store(true, std::memory_order_relaxed);
        zero_uncovered(img, oh);
      }
    });
    return !failed.load();
  }
};

template <typename Bits, typename Key, bool kMask>
bool unpool_tiled_as(const TiledUnpoolArgs& a) {
  const Key* keys;
  if constexpr (std::is_same_v<Key, int64_t>) {
    keys = a.indices;
  } else {
    keys = a.argmax;
  }
  return UnpoolTiledKernel<Bits, Key, kMask>{a, static_cast<const Bits*>(a.values), keys,
                                             static_cast<Bits*>(a.out)}
      .run();
}

inline bool unpool_tiled(const TiledUnpoolArgs& a) {
  if (a.values == nullptr) return unpool_tiled_as<uint8_t, uint8_t, true>(a);
  const auto by = [&](auto* bits_tag) {
    using Bits = std::remove_pointer_t<decltype(bits_tag)>;
    return a.indices ? unpool_tiled_as<Bits, int64_t, false>(a)
                     : unpool_tiled_as<Bits, uint8_t, false>(a);
  };
  switch (a.bytes) {
    case 1: return by(static_cast<uint8_t*>(nullptr));
    case 2: return by(static_cast<uint16_t*>(nullptr));
    case 4: return by(static_cast<uint32_t*>(nullptr));
    default: return by(static_cast<uint64_t*>(nullptr));
  }
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
