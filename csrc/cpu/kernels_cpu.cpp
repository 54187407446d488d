// CPU kernels: the fast paths where they apply, else parallel loops over the
// element functors that the CUDA kernels run too (poolx/element_ops.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "../kernels.h"
#include "../tensor_layout.h"
#include "argmax_check.h"
#include "fast_paths.h"
#include "parallel_elements.h"
#include "scatter.h"
#include "tap_table.h"
#include "poolx/element_ops.h"

namespace poolx {
namespace {

using at::Tensor;

#define POOLX_DISPATCH_POOLED_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, TYPE, NAME, __VA_ARGS__)
#define POOLX_DISPATCH_GRAD_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, TYPE, NAME, __VA_ARGS__)

void forward(const Tensor& input, const Tensor& values, const Tensor& argmax,
             const Pool2dGeometry& g) {
  if (fast_forward(input, values, argmax, g)) return;
  const Layout4d in_l = layout_of(input), out_l = layout_of(values);
  const at::ScalarType am_type = argmax.defined() ? argmax.scalar_type() : at::kByte;
  POOLX_DISPATCH_POOLED_TYPES(input.scalar_type(), "poolx_max_pool2d_cpu", [&] {
    dispatch_argmax_type(am_type, [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      const scalar_t* in = input.const_data_ptr<scalar_t>();
      scalar_t* out = values.mutable_data_ptr<scalar_t>();
      argmax_t* am = argmax.defined() ? argmax.mutable_data_ptr<argmax_t>() : nullptr;
      parallel_for_each_element(out_l, ForwardElem<scalar_t, argmax_t>{in, out, am, in_l, g});
    });
  });
}

int64_t first_invalid_argmax(const Tensor& argmax, const Pool2dGeometry& g) {
  return poolx::first_invalid_argmax(argmax.const_data_ptr(), argmax.scalar_type() == at::kInt,
                                     layout_of(argmax), g);
}

bool argmax_valid(const Tensor& argmax, const Pool2dGeometry& g) {
  return poolx::argmax_valid(argmax.const_data_ptr(), argmax.scalar_type() == at::kInt,
                             layout_of(argmax), g);
}

bool backward(const Tensor& grad_output, const Tensor& argmax, const Tensor& grad_input,
              const Pool2dGeometry& g) {
  std::atomic<bool> invalid{false};
  if (fast_backward(grad_output, argmax, grad_input, g, &invalid)) return !invalid;
  if (!argmax_valid(argmax, g)) return false;
  const Layout4d out_l = layout_of(grad_output), in_l = layout_of(grad_input);
  POOLX_DISPATCH_GRAD_TYPES(grad_output.scalar_type(), "poolx_max_pool2d_backward_cpu", [&] {
    dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
      const argmax_t* am = argmax.const_data_ptr<argmax_t>();
      scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
      // sums in the element type, as torch's CPU kernels add into the gradient
      parallel_for_each_element(
          in_l, BackwardElem<scalar_t, argmax_t, /*sum_t=*/scalar_t>{go, am, gi, out_l, g});
    });
  });
  return true;
}

// idx[i] = base + i * step + tap_offset[a[i]]; returns the largest a[i], which
// the caller checks against the taps.
uint8_t index_row(const uint8_t* a, int64_t* idx, int64_t n, int64_t base, int64_t step,
                  const int64_t* tap_offset) {
  uint8_t most = 0;
  for (int64_t i = 0; i < n; ++i) {
    idx[i] = base + i * step + tap_offset[a[i]];
    most = std::max(most, a[i]);
  }
  return most;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define POOLX_INDEX_ROW_AVX512 1
// The same on AVX-512 for windows of up to 16 taps whose offsets fit in
// int32: 16 argmax bytes at a time, their offsets by one permute of the table
// (which wraps taps past 15: the caller checks the largest value, returned as
// per-lane maxima).
__attribute__((target("avx512f,avx512bw,avx512vl"))) __m128i index_row_avx512(
    const uint8_t* a, int64_t* idx, int64_t n, int64_t base, int64_t step, const int32_t* table16,
    const int64_t* tap_offset) {
  const __m512i table = _mm512_loadu_si512(table16);
  __m512i pos_lo = _mm512_set_epi64(base + 7 * step, base + 6 * step, base + 5 * step,
                                    base + 4 * step, base + 3 * step, base + 2 * step,
                                    base + step, base);
  __m512i pos_hi = _mm512_add_epi64(pos_lo, _mm512_set1_epi64(8 * step));
  const __m512i advance = _mm512_set1_epi64(16 * step);
  __m128i most = _mm_setzero_si128();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i));
    most = _mm_max_epu8(most, bytes);
    const __m512i offset = _mm512_permutexvar_epi32(_mm512_cvtepu8_epi32(bytes), table);
    _mm512_storeu_si512(idx + i, _mm512_add_epi64(
        pos_lo, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(offset))));
    _mm512_storeu_si512(idx + i + 8, _mm512_add_epi64(
        pos_hi, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(offset, 1))));
    pos_lo = _mm512_add_epi64(pos_lo, advance);
    pos_hi = _mm512_add_epi64(pos_hi, advance);
  }
  const int64_t tail = i;
  for (; i < n; ++i) idx[i] = base + i * step + tap_offset[a[i]];
  const __mmask16 rest = static_cast<__mmask16>((1u << (n - tail)) - 1);
  return _mm_max_epu8(most, _mm_maskz_loadu_epi8(rest, a + tail));
}
#endif

// torch's index of a selected tap: its window's first tap plus the tap's
// offset in the plane, from a table of the 256 uint8 argmax values (no
// division per element), a row of outputs (NCHW) or a pixel's channels
// (channels_last) at a time. The rows check the argmax as they read it (the
// table has all 256 entries, so a bad value costs a wrong index, never a
// wrong access): value < taps everywhere, and the taps of windows that reach
// past the input by the rule. False where a value is invalid.
bool indices_by_tap_table(const uint8_t* argmax, int64_t* indices, const Layout4d& l,
                          const Pool2dGeometry& g, const int64_t* tap_offset) {
  const isa_none::ArgmaxRule rule(g);
  const bool all_whole = rule.all_whole();
  std::atomic<bool> invalid{false};
  // windows of up to 16 taps with int32 offsets, on AVX-512 (which
  // ATEN_CPU_CAPABILITY steers, as for the fast paths)
  const int64_t taps = g.kernel_h * g.kernel_w;
  int32_t table16[16] = {};
  bool by_permute = std::strcmp(cpu_fast_paths().isa, "avx512") == 0 && taps <= 16;
  for (int64_t t = 0; t < taps && by_permute; ++t) {
    by_permute = tap_offset[t] <= std::numeric_limits<int32_t>::max();
    table16[t] = static_cast<int32_t>(tap_offset[t]);
  }
  const int64_t row_len = l.channels_last ? l.c : l.w;
  const int64_t rows = l.numel() / row_len;
  at::parallel_for(0, rows, std::max<int64_t>(1, at::internal::GRAIN_SIZE / row_len),
                   [&](int64_t begin, int64_t end) {
    // the largest value seen, kept in registers
    uint8_t most = 0;
#ifdef POOLX_INDEX_ROW_AVX512
    __m128i most16 = _mm_setzero_si128();
#endif
    const auto row = [&](const uint8_t* a, int64_t* idx, int64_t base, int64_t step) {
#ifdef POOLX_INDEX_ROW_AVX512
      if (by_permute) {
        most16 = _mm_max_epu8(most16, index_row_avx512(a, idx, row_len, base, step, table16,
                                                       tap_offset));
        return;
      }
#endif
      most = std::max(most, index_row(a, idx, row_len, base, step, tap_offset));
    };
    bool valid = true;
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* a = argmax + r * row_len;
      int64_t* idx = indices + r * row_len;
      // each run checked after it is converted, from the cache
      if (l.channels_last) {
        const int64_t ow = r % l.w, oh = r / l.w % l.h;
        row(a, idx, (oh * g.stride_h - g.pad_h) * g.in_w + ow * g.stride_w - g.pad_w, 0);
        if (!all_whole && !(rule.whole_row(oh) && rule.whole_col(ow))) {
          valid &= rule.windows_valid(a, oh, ow, ow + 1, row_len, true);
        }
      } else {
        const int64_t oh = r % l.h;
        row(a, idx, (oh * g.stride_h - g.pad_h) * g.in_w - g.pad_w, g.stride_w);
        if (all_whole) continue;
        if (!rule.whole_row(oh)) {
          valid &= rule.windows_valid(a, oh, 0, l.w, 1, true);
        } else {
          for (const int64_t ow : rule.edge_cols()) valid &= rule.one_valid(a[ow], oh, ow);
        }
      }
    }
#ifdef POOLX_INDEX_ROW_AVX512
    alignas(16) uint8_t lanes[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes), most16);
    most = std::max(most, *std::max_element(lanes, lanes + 16));
#endif
    if (!valid || most >= taps) invalid.store(true, std::memory_order_relaxed);
  });
  return !invalid;
}

// The table serves where every window has an in-bounds tap, so that no index
// needs the element functor's clamp: without dilation, or without padding.
bool argmax_to_indices(const Tensor& argmax, const Tensor& indices, const Pool2dGeometry& g) {
  const bool no_empty_window = (g.dilation_h == 1 || g.pad_h == 0) &&
                               (g.dilation_w == 1 || g.pad_w == 0);
  if (argmax.scalar_type() == at::kByte && no_empty_window) {
    const TapTable taps(g);
    return indices_by_tap_table(argmax.const_data_ptr<uint8_t>(),
                                indices.mutable_data_ptr<int64_t>(), layout_of(argmax), g,
                                taps.offset);
  }
  if (!argmax_valid(argmax, g)) return false;
  dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
    using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
    const argmax_t* am = argmax.const_data_ptr<argmax_t>();
    int64_t* idx = indices.mutable_data_ptr<int64_t>();
    parallel_for_each_element(layout_of(argmax), IndexElem<argmax_t>{am, idx, g});
  });
  return true;
}

bool gather_by_argmax(const Tensor& src, const Tensor& argmax, const Tensor& out,
                      const Pool2dGeometry& g) {
  if (!argmax_valid(argmax, g)) return false;
  const Layout4d src_l = layout_of(src);
  POOLX_DISPATCH_GRAD_TYPES(src.scalar_type(), "poolx_gather_by_argmax_cpu", [&] {
    dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      const scalar_t* s = src.const_data_ptr<scalar_t>();
      const argmax_t* am = argmax.const_data_ptr<argmax_t>();
      scalar_t* o_ptr = out.mutable_data_ptr<scalar_t>();
      parallel_for_each_element(layout_of(out),
                                GatherElem<scalar_t, argmax_t>{s, am, o_ptr, src_l, g});
    });
  });
  return true;
}

// The tiled gather (unpool_tiled.h) checks that every tap lies in its window,
// which is the whole check where windows tile the input; the scatter checks
// each run of argmax before it looks taps up.
bool argmax_to_mask(const Tensor& argmax, const Tensor& mask, const Pool2dGeometry& g) {
  return fast_unpool_by_argmax(Tensor(), argmax, mask, g) ||
         scatter_by_argmax_cpu(Tensor(), argmax, mask, g);
}

bool max_unpool2d_argmax(const Tensor& values, const Tensor& argmax, const Tensor& out,
                         const Pool2dGeometry& g) {
  std::atomic<bool> invalid{false};
  if (fast_unpool_argmax(values, argmax, out, g, &invalid)) return !invalid;
  return fast_unpool_by_argmax(values, argmax, out, g) ||
         scatter_by_argmax_cpu(values, argmax, out, g);
}

void max_unpool2d_indices(const Tensor& values, const Tensor& indices, const Tensor& out) {
  if (!fast_unpool_indices(values, indices, out)) max_unpool2d_indices_cpu(values, indices, out);
}

}  // namespace

const Pool2dKernels& cpu_kernels() {
  static const Pool2dKernels kernels{forward,          backward,       argmax_to_indices,
                                     gather_by_argmax, argmax_to_mask, max_unpool2d_argmax,
                                     max_unpool2d_indices, first_invalid_argmax};
  return kernels;
}

}  // namespace poolx
