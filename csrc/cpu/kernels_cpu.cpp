// CPU kernels: the fast paths where they apply, else parallel loops over the
// element functors that the CUDA kernels run too (poolx/element_ops.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

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

// idx[i] = base + pos[i] + tap_offset[a[i]]; returns the largest a[i], which
// the caller checks against the taps.
uint8_t index_run(const uint8_t* a, int64_t* idx, int64_t n, int64_t base, const int64_t* pos,
                  const int64_t* tap_offset) {
  uint8_t most = 0;
  for (int64_t i = 0; i < n; ++i) {
    idx[i] = base + pos[i] + tap_offset[a[i]];
    most = std::max(most, a[i]);
  }
  return most;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define POOLX_INDEX_RUN_AVX512 1
// The same on AVX-512 for windows of up to 16 taps whose offsets fit in
// int32: 16 argmax bytes at a time (the last ones masked), their offsets by
// one permute of the table (which wraps taps past 15: the caller checks the
// largest value, returned as per-lane maxima).
__attribute__((target("avx512f,avx512bw,avx512vl"))) __m128i index_run_avx512(
    const uint8_t* a, int64_t* idx, int64_t n, int64_t base, const int64_t* pos,
    const int32_t* table16) {
  const __m512i table = _mm512_loadu_si512(table16);
  const __m512i base8 = _mm512_set1_epi64(base);
  __m128i most = _mm_setzero_si128();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 in = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __mmask8 lo = static_cast<__mmask8>(in), hi = static_cast<__mmask8>(in >> 8);
    const __m128i bytes = _mm_maskz_loadu_epi8(in, a + i);
    most = _mm_max_epu8(most, bytes);
    const __m512i offset = _mm512_permutexvar_epi32(_mm512_cvtepu8_epi32(bytes), table);
    const __m512i at_lo = _mm512_add_epi64(base8, _mm512_maskz_loadu_epi64(lo, pos + i));
    const __m512i at_hi = _mm512_add_epi64(base8, _mm512_maskz_loadu_epi64(hi, pos + i + 8));
    _mm512_mask_storeu_epi64(idx + i, lo, _mm512_add_epi64(
        at_lo, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(offset))));
    _mm512_mask_storeu_epi64(idx + i + 8, hi, _mm512_add_epi64(
        at_hi, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(offset, 1))));
  }
  return most;
}
#endif

// torch's index of a selected tap: its window's first tap plus the tap's
// offset in the plane, from a table of the 256 uint8 argmax values (no
// division per element). An output row (W pixels of C channels; C = 1 in
// NCHW) goes in runs of whole pixels, each element's window start taken from
// a pattern of positions that every run shares, so that few channels still
// fill whole vectors. The rows check the argmax as they read it (the table
// has all 256 entries, so a bad value costs a wrong index, never a wrong
// access): value < taps everywhere, and the taps of windows that reach past
// the input by the rule. False where a value is invalid.
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
  const int64_t C = l.channels_last ? l.c : 1, row_len = l.w * C;
  const int64_t run_pixels = std::min(l.w, std::max<int64_t>(1, 1024 / C));
  std::vector<int64_t> pos(run_pixels * C);  // element e's window start in its run
  for (int64_t e = 0; e < run_pixels * C; ++e) pos[e] = e / C * g.stride_w;
  const int64_t rows = l.numel() / row_len;
  at::parallel_for(0, rows, std::max<int64_t>(1, at::internal::GRAIN_SIZE / row_len),
                   [&](int64_t begin, int64_t end) {
    // the largest value seen, kept in registers
    uint8_t most = 0;
#ifdef POOLX_INDEX_RUN_AVX512
    __m128i most16 = _mm_setzero_si128();
#endif
    bool valid = true;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t oh = r % l.h;
      const uint8_t* a = argmax + r * row_len;
      int64_t* idx = indices + r * row_len;
      const int64_t row_base = (oh * g.stride_h - g.pad_h) * g.in_w - g.pad_w;
      for (int64_t ow = 0; ow < l.w; ow += run_pixels) {
        const int64_t first = ow * C, n = std::min(run_pixels, l.w - ow) * C;
        const int64_t base = row_base + ow * g.stride_w;
#ifdef POOLX_INDEX_RUN_AVX512
        if (by_permute) {
          most16 = _mm_max_epu8(most16,
                                index_run_avx512(a + first, idx + first, n, base, pos.data(),
                                                 table16));
          continue;
        }
#endif
        most = std::max(most, index_run(a + first, idx + first, n, base, pos.data(), tap_offset));
      }
      // each row checked after it is converted, from the cache
      if (!all_whole) valid &= rule.windows_valid(a, oh, 0, l.w, C, /*below_taps=*/true);
    }
#ifdef POOLX_INDEX_RUN_AVX512
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
