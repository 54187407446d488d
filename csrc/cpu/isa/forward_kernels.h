// Vectorized forward in channels_last, along C (any geometry); the task
// grain that the forward kernels share (forward_nchw.h: NCHW rows).
#pragma once

#include <ATen/Parallel.h>

#include <type_traits>
#include <utility>

#include "../fast_paths.h"
#include "../index_rows.h"
#include "poolx/elements.h"
#include "pass_vectors.h"
#include "stream_stores.h"
#include "argmax_lanes.h"
#include "index_lanes.h"
#include "tap_sweeps.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// Rows per parallel task, so that a task moves some tens of KB.
inline int64_t grain_for(int64_t elems_per_row) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, elems_per_row));
}

// channels_last, any geometry (adaptive too): one output pixel per step, kLanes channels
// per vector; volumes (channels_last_3d, depth-folded: geometry.h) loop over
// their window's slices too. kTile2x2: 2x2 windows tiling the input (no
// padding, dilation or cut window), one or two slices deep, whose tap loops
// then unroll; with few channels the generic loops' bookkeeping costs more
// than the loads.
template <typename T, bool kArgmax, bool kTile2x2>
void forward_channels_last(const FastForwardArgs& a, bool stream) {
  // Sizes as locals, not read through `a`: the stores through `out` could
  // alias those fields, which the compiler would then reload per vector.
  const Pool2dGeometry g = a.g;
  const int64_t C = a.in_l.c, rows = a.out_l.n * a.out_l.h;  // a.out_l.h: out_d * out_h
  const T* const in = static_cast<const T*>(a.input);
  T* const out = static_cast<T*>(a.values);
  uint8_t* const argmax = a.argmax;
  const int64_t kernel_w = kTile2x2 ? 2 : g.kernel_w;
  const int64_t dilation_h = kTile2x2 ? 1 : g.dilation_h, dilation_w = kTile2x2 ? 1 : g.dilation_w;
  const int64_t row_stride = g.in_w * C, slice_stride = g.in_h * row_stride;
  const int64_t image_stride = g.in_d * slice_stride, depth_taps = g.kernel_d;
  constexpr int64_t kPixelPass = kPassVectors<T, kArgmax>;
  constexpr int64_t kRowPass = kRowPassVectors<T, kArgmax>;
  // Windows along one row whose pixel fits one pass read the input in order:
  // no prefetches there. The row loops below take exactly kRowPass or 8
  // vectors; a pixel of up to kPixelPass vectors that are not whole goes by
  // a few shorter passes, all within that pixel.
  static_assert(kRowPass == kPixelPass || kRowPass == 8 || kRowPass == 16);
  const bool row_passes = !kTile2x2 && g.kernel_h == 1 && g.kernel_d == 1 &&
                          (C <= kPixelPass * kLanes ||
                           (kRowPass > kPixelPass && (C == kRowPass * kLanes || C == 8 * kLanes)));
  const bool prefetch = worth_prefetching<T>(a.in_l.numel()) && !row_passes;
  // Each tap is prefetched where it will be two windows later (or
  // kPrefetchBytes ahead, the more): wide pixels (2-D windows of 512
  // channels, 1-D ones of 256 with argmax) step past a fixed lead within one window.
  const int64_t lead =
      std::max(kPrefetchBytes, 2 * g.stride_w * C * static_cast<int64_t>(sizeof(T)));
  constexpr int64_t kVectorBytes = kLanes * static_cast<int64_t>(sizeof(T));
  const IndexRows* const index_rows = kArgmax ? a.index_rows : nullptr;
  const bool sweep_taps = kTile2x2 && std::is_same_v<T, float> &&
                          TapSweeps<kArgmax>::applies(C) && g.planar();
  // return_indices: windows of up to 16 taps write each index from their argmax lanes;
  // wider ones, tap sweeps and tiled ones on AVX-512 (measured slower so) convert rows.
  constexpr bool kDirectIndices = kArgmax && (!kTile2x2 || kTiledDirectIndices);
  const IndexLanes direct = kDirectIndices && !sweep_taps ? IndexLanes(index_rows) : IndexLanes();
  const IndexRows* const converts = direct ? nullptr : index_rows;
  const bool stream_argmax = stream && converts == nullptr;  // rows read back stay cached
  // Rows are converted a few pixels behind the values (some 256 elements at
  // a time), not a whole row later: the index stores then overlap the
  // input's loads instead of following them in a burst of their own.
  const int64_t index_group = std::max<int64_t>(1, 256 / C);
  // Argmax passes over general windows go by take_ordered (kOrderedPasses), whose taps
  // never start the max, so that take can go on from it. Value passes gained nothing
  // so, and the four taps of tiled windows lost in bfloat16.
  [[maybe_unused]] constexpr bool kOrdered = kOrderedPasses && kArgmax && !kTile2x2;
  at::parallel_for(0, rows, grain_for(g.out_w * C * g.window_size()), [=](int64_t b,
                                                                          int64_t e) {
    TapSweeps<kArgmax> sweeps;
    // A task that meets a NaN takes its other passes by rule: data full of
    // NaN then costs one pass more, not one per pass.
    [[maybe_unused]] bool ordered = true;
    const auto pool_row = [&](int64_t r) {
      const int64_t oh = r % g.out_h, slab = r / g.out_h;  // slab: image * out_d + od
      const T* image = in + (slab / g.out_d) * image_stride;
      // (adaptive axes too: AxisT places their windows)
      const int64_t od = slab % g.out_d, d0 = g.axis_d().start(od), h0 = g.axis_h().start(oh);
      const TapRange taps_d =
          kTile2x2 || g.planar() ? TapRange{0, depth_taps} : g.axis_d().taps(od, d0);
      const TapRange taps_h = kTile2x2 ? TapRange{0, 2} : g.axis_h().taps(oh, h0);
      int64_t indexed = 0;  // pixels of this row whose indices are converted
      const int64_t row_start = direct ? index_rows->row_start(r) : 0;
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        if (converts != nullptr && ow - indexed >= index_group) {
          converts->convert(r, indexed, ow);
          indexed = ow;
        }
        const int64_t first_index = direct ? row_start + index_rows->column_start(ow) : 0;
        const int64_t w0 = g.axis_w().start(ow);
        const TapRange taps_w = kTile2x2 ? TapRange{0, 2} : g.axis_w().taps(ow, w0);
        const int64_t o = (r * g.out_w + ow) * C;
        const int64_t first_tap =
            (taps_d.begin * g.kernel_h + taps_h.begin) * kernel_w + taps_w.begin;
        // visit(p, tap, first) for each tap of the window, p at its channel
        // c0, of which the pass reads pass_bytes; `first` (a
        // std::bool_constant) is true for a tap that may start the running
        // max instead of being compared with -inf: the first tap of a tiled
        // window, whose four taps are spelled out.
        const auto for_each_tap = [&](int64_t c0, int64_t pass_bytes, auto&& visit) {
          if constexpr (kTile2x2) {
            // the 2x2 taps of one slice from tap `tap`
            const auto slice_taps = [&](const T* p, int64_t tap, auto first) {
              if (prefetch) {
                for (const T* q : {p, p + C, p + row_stride, p + row_stride + C}) {
                  prefetch_ahead(q, pass_bytes, lead);
                }
              }
              visit(p, tap, first);
              visit(p + C, tap + 1, std::false_type{});
              visit(p + row_stride, tap + 2, std::false_type{});
              visit(p + row_stride + C, tap + 3, std::false_type{});
            };
            const T* p = image + d0 * slice_stride + h0 * row_stride + w0 * C + c0;
            slice_taps(p, 0, std::true_type{});
            if (depth_taps == 2) slice_taps(p + slice_stride, 4, std::false_type{});
          } else {
            for (int64_t kd = taps_d.begin; kd < taps_d.end; ++kd) {
              const T* slice = image + (d0 + kd * g.dilation_d) * slice_stride + c0;
              for (int64_t kh = taps_h.begin; kh < taps_h.end; ++kh) {
                const T* row = slice + (h0 + kh * dilation_h) * row_stride;
                for (int64_t kw = taps_w.begin; kw < taps_w.end; ++kw) {
                  const T* p = row + (w0 + kw * dilation_w) * C;
                  if (prefetch) prefetch_ahead(p, pass_bytes, lead);
                  visit(p, (kd * g.kernel_h + kh) * kernel_w + kw, std::false_type{});
                }
              }
            }
          }
        };
        if constexpr (kTile2x2 && std::is_same_v<T, float>) {
          if (sweep_taps) {  // planes alone
            sweeps.pool(image + h0 * row_stride + w0 * C, C, row_stride, out + o,
                        kArgmax ? argmax + o : nullptr, stream, stream_argmax);
            continue;
          }
        }
        int64_t c0 = 0;
        if constexpr (kSplitsPairsByShift<T>) {
          // kCount loads of 2 * kLanes channels from c0 in one pass over the
          // window, each as even and odd channels (the max is lane-wise, so
          // their order matters only when stored)
          const auto pool_pairs = [&](int64_t c0, auto count) {
            constexpr int64_t kCount = decltype(count)::value;
            auto even = running_maxima<kArgmax>(first_tap, std::make_index_sequence<kCount>{});
            auto odd = running_maxima<kArgmax>(first_tap, std::make_index_sequence<kCount>{});
            for_each_tap(c0, 2 * kCount * kVectorBytes, [&](const T* p, int64_t tap, auto first) {
              for (int64_t j = 0; j < kCount; ++j) {
                const auto [e, od] = load_even_odd(p + 2 * j * kLanes, 2 * kLanes);
                even[j].take(e, tap, first);
                odd[j].take(od, tap, first);
              }
            });
            #pragma GCC unroll 16  // whole: best[j] stays in registers
            for (int64_t j = 0; j < kCount; ++j) {
              const int64_t at = o + c0 + 2 * j * kLanes;
              const auto [lo, hi] = at::vec::interleave2(even[j].value, odd[j].value);
              store_lanes(out + at, lo, kLanes, stream);
              store_lanes(out + at + kLanes, hi, kLanes, stream);
              if constexpr (kArgmax) {
                const auto [am_lo, am_hi] = at::vec::interleave2(even[j].argmax, odd[j].argmax);
                store_argmax_lanes(argmax + at, am_lo, kLanes, stream_argmax);
                store_argmax_lanes(argmax + at + kLanes, am_hi, kLanes, stream_argmax);
                if (kDirectIndices && direct) direct.store(at, am_lo, first_index, kLanes);
                if (kDirectIndices && direct) direct.store(at + kLanes, am_hi, first_index, kLanes);
              }
            }
          };
          // a general window's taps 256 bytes per pass (as pool_vectors
          // below); a tiled window's four taps go a line at a time
          for (; !kTile2x2 && c0 + 8 * kLanes <= C; c0 += 8 * kLanes) {
            pool_pairs(c0, std::integral_constant<int64_t, 4>{});
          }
          for (; !kTile2x2 && c0 + 4 * kLanes <= C; c0 += 4 * kLanes) {
            pool_pairs(c0, std::integral_constant<int64_t, 2>{});
          }
          for (; c0 + 2 * kLanes <= C; c0 += 2 * kLanes) {
            pool_pairs(c0, std::integral_constant<int64_t, 1>{});
          }
        }
        // kCount vectors of channels from c0 (the last n lanes wide), one pass over the window;
        // its visits inlined: a call keeps best[] in memory (as GCC did AVX2's tiled 16-bit taps)
        const auto pool_vectors = [&](int64_t c0, auto count, int64_t n) {
          constexpr int64_t kCount = decltype(count)::value;
          const auto lanes = [&](int64_t j) { return j + 1 < kCount ? kLanes : n; };
          auto best = running_maxima<kArgmax>(first_tap, std::make_index_sequence<kCount>{});
          bool by_rule = true;
#if defined(CPU_CAPABILITY_AVX2)
          if constexpr (kOrdered) {
            if (ordered) {
              by_rule = false;
              Vec sums[2] = {Vec(0.f), Vec(0.f)};  // two, so that the adds overlap
              for_each_tap(c0, kCount * kVectorBytes,
                           [&](const T* p, int64_t tap, auto) C10_ALWAYS_INLINE_ATTRIBUTE {
                for (int64_t j = 0; j < kCount; ++j) {
                  const Vec v = load_float(p + j * kLanes, lanes(j));
                  best[j].take_ordered(v, tap);
                  sums[j % 2] = sums[j % 2] + v;
                }
              });
              // again by rule from the numbers' max and first tap: only a NaN replaces them
              if (holds_nan(sums[0] + sums[1])) {
                by_rule = true;
                ordered = false;
              }
            }
          }
#endif
          if (by_rule) {
            for_each_tap(c0, kCount * kVectorBytes,
                         [&](const T* p, int64_t tap, auto first) C10_ALWAYS_INLINE_ATTRIBUTE {
              for (int64_t j = 0; j < kCount; ++j) {
                best[j].take(load_float(p + j * kLanes, lanes(j)), tap, first);
              }
            });
          }
          #pragma GCC unroll 16  // whole: best[j] stays in registers
          for (int64_t j = 0; j < kCount; ++j) {
            const int64_t at = o + c0 + j * kLanes;
            store_lanes(out + at, best[j].value, lanes(j), stream);
            if constexpr (kArgmax) {
              store_argmax_lanes(argmax + at, best[j].argmax, lanes(j), stream_argmax);
              if (kDirectIndices && direct) direct.store(at, best[j].argmax, first_index, lanes(j));
            }
          }
        };
        // A general window's taps go kPassVectors vectors per pass, then
        // eight and four: fewer passes over the taps save the per-tap work,
        // which a pass of one cache line per tap of wide pixels spent on
        // every 64 bytes (global pooling, 3x3 windows of 256-512 channels).
        // A tiled 2x2 window's vectors of 32 bytes or more go kTiledPassVectors
        // per pass; 16-byte ones (16-bit types on AVX2) by whole lines.
        constexpr int64_t kLine = kTile2x2 && kVectorBytes >= 32
                                      ? kTiledPassVectors
                                      : std::max<int64_t>(1, 64 / kVectorBytes);
        if constexpr (!kTile2x2) {
          if constexpr (kRowPass > kPixelPass) {
            if (row_passes) {
              for (; c0 + kRowPass * kLanes <= C; c0 += kRowPass * kLanes) {
                pool_vectors(c0, std::integral_constant<int64_t, kRowPass>{}, kLanes);
              }
              if constexpr (kRowPass > 8) {
                for (; c0 + 8 * kLanes <= C; c0 += 8 * kLanes) {
                  pool_vectors(c0, std::integral_constant<int64_t, 8>{}, kLanes);
                }
              }
            }
          }
          for (; c0 + kPixelPass * kLanes <= C; c0 += kPixelPass * kLanes) {
            pool_vectors(c0, std::integral_constant<int64_t, kPixelPass>{}, kLanes);
          }
          if constexpr (kPixelPass > 8) {
            for (; c0 + 8 * kLanes <= C; c0 += 8 * kLanes) {
              pool_vectors(c0, std::integral_constant<int64_t, 8>{}, kLanes);
            }
          }
          for (; c0 + 4 * kLanes <= C; c0 += 4 * kLanes) {
            pool_vectors(c0, std::integral_constant<int64_t, 4>{}, kLanes);
          }
        }
        for (; kLine > 1 && c0 + kLine * kLanes <= C; c0 += kLine * kLanes) {
          pool_vectors(c0, std::integral_constant<int64_t, kLine>{}, kLanes);
        }
        for (; c0 < C; c0 += kLanes) {
          pool_vectors(c0, std::integral_constant<int64_t, 1>{}, std::min(kLanes, C - c0));
        }
      }
      if (converts != nullptr) converts->convert(r, indexed, g.out_w);
    };
    for (int64_t r = b; r < e; ++r) pool_row(r);
    if (index_rows != nullptr) index_rows->publish();
    if (stream) stream_fence();
  });
}

template <typename T, bool kArgmax>
void forward_channels_last(const FastForwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const int64_t C = a.in_l.c, outputs = a.out_l.numel();
  const bool stream =
      C % kLanes == 0 && worth_streaming(static_cast<T*>(a.values), outputs, a.argmax);
  const bool tile_2x2 = g.kernel_h == 2 && g.kernel_w == 2 && g.kernel_d <= 2 && tiles_volume(g);
  tile_2x2 ? forward_channels_last<T, kArgmax, true>(a, stream)
           : forward_channels_last<T, kArgmax, false>(a, stream);
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
