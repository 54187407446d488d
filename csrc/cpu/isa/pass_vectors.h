// How many vectors of channels one pass of forward_channels_last
// (forward_kernels.h) takes over a window's taps.
#pragma once

#include <algorithm>
#include <cstdint>

#include "vec_io.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// Whether tiled 2x2 windows (forward_kernels.h) write return_indices' int64
// indices from their argmax lanes, as general windows do, instead of
// converting each row of argmax read back: on AVX2 (a Zen 3 EPYC) the rows'
// conversion cost more than the lanes' stores; AVX-512 measured the other way.
constexpr bool kTiledDirectIndices =
#if defined(CPU_CAPABILITY_AVX2)
    true;
#else
    false;
#endif

// Vectors of 32 bytes or more in one pass of forward_channels_last over a
// tiled 2x2 window's four taps, which cost little to address: one on AVX-512;
// on AVX2 four, where a pass's bookkeeping (its taps' addresses, reloaded
// after every store) outweighed one vector's work (float32 channels_last
// 2x2 of 40-96 channels: faster by four than by one, two or eight).
constexpr int64_t kTiledPassVectors =
#if defined(CPU_CAPABILITY_AVX2)
    4;
#else
    1;
#endif

// Vectors in one pass of forward_channels_last over a general window (at
// most 256 bytes elsewhere). With argmax on AVX-512, eight (float16's 256
// bytes) spilled their running maxima and argmaxes to the stack: four there;
// float32 passes hold four anyway, and bfloat16 goes by pairs. AVX2 measured
// faster with sixteen vectors for every type (512 bytes of float32) than with
// eight or thirty-two, though sixteen running maxima do not fit its registers.
template <typename T, bool kArgmax>
constexpr int64_t kPassVectors =
#if defined(CPU_CAPABILITY_AVX2)
    16;
#elif defined(CPU_CAPABILITY_AVX512)
    std::min<int64_t>(kArgmax ? 4 : 8, 256 / (kLanes * int64_t{sizeof(T)}));
#else
    std::min<int64_t>(8, 256 / (kLanes * int64_t{sizeof(T)}));
#endif

// Windows along one row (1-D ones) read their taps' pixels one after
// another, and passes over whole pixels read the input in order, which the
// hardware prefetcher follows without prefetches of ours (passes over slices
// of a pixel jump between them, and need those). On AVX-512 such passes of
// float32 go up to 1024 bytes, 512 with argmax (eight vectors: the spill
// above is float16's).
template <typename T, bool kArgmax>
constexpr int64_t kRowPassVectors =
#if defined(CPU_CAPABILITY_AVX512)
    sizeof(T) == 4 ? (kArgmax ? 8 : 16) :
#endif
                   kPassVectors<T, kArgmax>;

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
