// Backward, any geometry, by a scatter per NCHW plane (NCDHW volume) or per
// channels_last image of few channels: each output's gradient is added at its
// selected tap in output order (pixel by pixel, a pixel's channels in order),
// the order in which torch's CPU kernels and the per-element gather sum, so
// results agree bit for bit. 16-bit sums round to T after every add, as torch
// adds into the element type. NCHW unpool by argmax is the same scatter with
// each value's bits stored instead of added: the last window that selects a
// tap wins.
//
// A plane of overlapping windows is summed in a float scratch that stays in
// the cache, then copied to grad_input (streamed where the gradient is
// large), the scratch zeroed as it is read: summed in grad_input itself,
// each 16-bit sum would be widened before every add and narrowed after.
// Unless streamed, windows that share no input take one add per input, onto
// zero: their planes are zeroed by memset and summed in place, which spares
// the scratch's second pass; so are planes too large for the cache and float32
// gradients that stay in it.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../argmax_check.h"
#include "../volume_scatter_kernel.h"
#include "forward_kernels.h"
#include "plane_scatter.h"
#include "stream_stores.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// sums (T values) copied to out, exactly; sums left zero.
template <typename T>
inline void move_sums(float* sums, T* out, int64_t n, bool stream) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    store_lanes(out + i, Vec::loadu(sums + i), kLanes, stream);
    Vec(0.f).store(sums + i);
  }
  for (; i < n; ++i) {
    out[i] = static_cast<T>(sums[i]);
    sums[i] = 0.f;
  }
}

// scratch's n elements moved to out bit for bit (streamed where `stream`),
// scratch left zero: B is an unsigned type, its elements moved as float lanes.
template <typename B>
inline void move_bits(B* scratch, B* out, int64_t n, bool stream) {
  constexpr int64_t kStep = kLanes * sizeof(float) / sizeof(B);
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const Vec v = Vec::loadu(scratch + i);
    if (stream && vector_aligned(out + i)) stream_vector(reinterpret_cast<float*>(out + i), v);
    else v.store(out + i);
    Vec(0.f).store(scratch + i);
  }
  std::copy(scratch + i, scratch + n, out + i);
  std::fill(scratch + i, scratch + n, B(0));
}

// Planes whose float sums take at most this many bytes are summed in a
// scratch: half the L2 cache, beside the rows of gradient and argmax.
constexpr int64_t kScratchMaxBytes = 256 * 1024;

// Each task sums whole planes: NCHW planes, or channels_last images. With
// kCopy (unpool by argmax), T is an unsigned type of the values' size, and
// the plane receives each value's bits where its window selects.
template <typename T, bool kPixels, bool kCopy = false>
void backward_scatter(const FastBackwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const T* const go = static_cast<const T*>(a.grad_output);
  T* const gi = static_cast<T*>(a.grad_input);
  const int64_t C = a.in_l.channels_last ? a.in_l.c : 1;
  const PlaneScatter<T, kPixels> scatter(g, C);
  if (!g.planar() && !argmax_valid(a.argmax, false, a.out_l, g)) {
    a.argmax_invalid->store(true);
    return;
  }
  const int64_t plane = g.in_d * g.in_h * g.in_w * C;
  const int64_t out_plane = g.out_d * g.out_h * g.out_w * C;
  const int64_t planes = a.in_l.n * a.in_l.c / C;
  // Streamed whole, every plane starts a cache line. A float32 gradient
  // that stays in the cache is as fast to sum in place, without the
  // scratch's extra pass.
  const bool stream = worth_streaming(gi, planes * plane) &&
                      plane * static_cast<int64_t>(sizeof(T)) % 64 == 0;
  // holds T values exactly: float sums, or the bits themselves
  using Scratch = std::conditional_t<kCopy, T, float>;
  constexpr bool kScratch = kCopy || sizeof(T) <= sizeof(float);
  const bool in_scratch = kScratch &&
                          plane * static_cast<int64_t>(sizeof(Scratch)) <= kScratchMaxBytes &&
                          (stream || (sizeof(T) < sizeof(float) && !windows_disjoint(g)));
  at::parallel_for(0, planes, grain_for(plane), [&](int64_t b, int64_t e) {
    bool valid = true;
    std::vector<Scratch> sums(in_scratch ? plane : 0);
    for (int64_t p = b; p < e && valid; ++p) {  // an invalid argmax ends the task
      const T* go_plane = go + p * out_plane;
      const uint8_t* am_plane = a.argmax + p * out_plane;
      T* gi_plane = gi + p * plane;
      if constexpr (kScratch) {
        if (in_scratch) {
          valid &= scatter.template add<kCopy>(go_plane, am_plane, sums.data());
          if constexpr (kCopy) move_bits(sums.data(), gi_plane, plane, stream);
          else move_sums(sums.data(), gi_plane, plane, stream);
          continue;
        }
      }
      std::memset(static_cast<void*>(gi_plane), 0, plane * sizeof(T));
      valid &= scatter.template add<kCopy>(go_plane, am_plane, gi_plane);
    }
    if (!valid) a.argmax_invalid->store(true, std::memory_order_relaxed);
    if (stream) stream_fence();
  });
}

template <typename T>
void backward_scatter(const FastBackwardArgs& a) {
  a.in_l.channels_last ? backward_scatter<T, true>(a) : backward_scatter<T, false>(a);
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
