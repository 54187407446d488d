// Unpool, by int64 indices or by argmax, of NCHW planes small enough for a
// block's shared memory, in one pass: the CUDA counterpart of the CPU's
// scatter per plane. A block takes a group of whole planes and keeps a key
// per output element in shared memory: zeroed, then each pooled element
// claims its target with atomicMax of 1 + its offset in the group (the last
// in row-major order wins, as in torch's CPU unpool; atomicMax does not
// depend on the order the claims arrive in), then every output is written
// once, coalesced: the claimed element's value or 0. Indices or argmax and
// values are read once and the output written once: no zero fill and no
// keys in global memory, which the general unpool by indices reads and
// writes for every output (argmax_ops.cu), and no walk over the later
// windows that a scatter per window takes where windows overlap
// (argmax_scatter.cuh).
#pragma once

#include <algorithm>
#include <type_traits>

#include "argmax_scatter.cuh"
#include "cuda_common.cuh"
#include "poolx/layout.h"

namespace poolx {
namespace cuda_launch {

constexpr int kPlaneThreads = 512;
// Three blocks of 512 threads per SM (40 registers each) hide the latency of
// the claims' loads; a 112x112 plane's keys let four fit in shared memory.
constexpr int kPlaneMinBlocks = 3;
// 64 KiB of keys: a 112x112 plane (ResNet's stem) fits, and every GPU since
// sm_75 gives a block that much shared memory.
constexpr int64_t kMaxPlaneKeys = 16384;
// Planes are grouped up to this many outputs, so small planes fill a block.
constexpr int64_t kGroupOutputs = 4096;

__device__ __forceinline__ bool valid_unpool_index(int64_t index, int64_t plane_size) {
  // as torch's CUDA unpool does: no host sync to look at the indices first
  const bool valid = index >= 0 && index < plane_size;
  CUDA_KERNEL_ASSERT(valid && "poolx: max_unpool2d: Found an invalid max index "
                              "(outside its output plane)");
  return valid;
}

// Sizes of a group of planes, which the last group may not fill.
struct PlaneGroups {
  int64_t planes;              // in the whole tensor
  int32_t per_group;           // planes in a full group
  int32_t in_h, in_w;          // a pooled plane
  int32_t out_plane;           // elements of an unpooled plane

  __device__ int32_t planes_in(int64_t group) const {
    const int64_t left = planes - group * per_group;
    return static_cast<int32_t>(left < per_group ? left : per_group);
  }
  __device__ int32_t in_plane() const { return in_h * in_w; }
  __device__ int64_t in_offset(int64_t group) const {
    return group * per_group * in_plane();
  }
  __device__ int64_t out_offset(int64_t group) const { return group * per_group * out_plane; }
};

// Pooled element p of a group as (plane, row, col), stepped by a constant
// stride without a division per step (the claims are bound by arithmetic).
struct PooledWalk {
  int32_t plane, row, col;
  int32_t d_plane, d_row, d_col;  // the step, split the same way

  __device__ static PooledWalk start(int32_t p, int32_t step, int32_t h, int32_t w) {
    const int32_t pr = p / w, sr = step / w;
    return {pr / h, pr % h, p % w, sr / h, sr % h, step % w};
  }
  __device__ void advance(int32_t h, int32_t w) {
    col += d_col;
    if (col >= w) {
      col -= w;
      ++row;
    }
    row += d_row;
    if (row >= h) {
      row -= h;
      ++plane;
    }
    plane += d_plane;
  }
};

// Targets of int64 indices (offsets in their output plane).
struct IndexClaims {
  const int64_t* indices;

  __device__ bool operator()(const PlaneGroups& s, int64_t group, int32_t p,
                             const PooledWalk& at, int32_t* t) const {
    const int64_t index = indices[s.in_offset(group) + p];
    if (!valid_unpool_index(index, s.out_plane)) return false;
    *t = at.plane * s.out_plane + static_cast<int32_t>(index);
    return true;
  }
};

// Targets of an argmax: the tap its window selects, if it has one (a bad
// value fires a device-side assert, as in the scatter per window).
template <typename argmax_t>
struct ArgmaxClaims {
  const argmax_t* argmax;
  Pool2dGeometryT<int32_t> g;

  __device__ bool operator()(const PlaneGroups& s, int64_t group, int32_t p,
                             const PooledWalk& at, int32_t* t) const {
    InputPos<int32_t> pos;
    if (!selected_input(argmax + s.in_offset(group), g, at.row, at.col, p, &pos)) return false;
    *t = at.plane * s.out_plane + pos.row(g) * g.in_w + pos.w;
    return true;
  }
};

// The block program: three phases, a block barrier after each. The last
// writes 4 adjacent outputs per thread: 4 keys in one shared load, then 4
// independent reads of the claimed values (latency, not bandwidth, bounds
// this phase).
template <typename Claims, typename B>
struct PlaneScatter {
  static constexpr int kPhases = 3;
  PlaneGroups s;
  Claims claims;
  const B* values;
  B* out;

  __device__ void phase(int k, int64_t group, unsigned* keys) const {
    const int32_t planes = s.planes_in(group);
    const auto first = static_cast<int32_t>(threadIdx.x), step = static_cast<int32_t>(blockDim.x);
    const int32_t outputs = planes * s.out_plane, inputs = planes * s.in_plane();
    if (k == 0) {
      for (int32_t e = first; e < outputs; e += step) keys[e] = 0;
    } else if (k == 1) {
      if (inputs == 0) return;
      PooledWalk at = PooledWalk::start(first, step, s.in_h, s.in_w);
      for (int32_t p = first; p < inputs; p += step, at.advance(s.in_h, s.in_w)) {
        int32_t t;
        if (claims(s, group, p, at, &t)) atomicMax(keys + t, static_cast<unsigned>(p) + 1);
      }
    } else {
      const B* from = values + s.in_offset(group);
      B* to = out + s.out_offset(group);
      const auto claimed = [from](unsigned key) { return key == 0 ? B(0) : from[key - 1]; };
      const int32_t whole = outputs / 4 * 4;
      for (int32_t e = 4 * first; e < whole; e += 4 * step) {
        unsigned key[4];
        load_vectors<4>(keys + e, key);
#pragma unroll
        for (int i = 0; i < 4; ++i) to[e + i] = claimed(key[i]);
      }
      for (int32_t e = whole + first; e < outputs; e += step) to[e] = claimed(keys[e]);
    }
  }
};

#ifndef POOLX_CUDA_EMULATION
template <typename Program>
__global__ void __launch_bounds__(kPlaneThreads, kPlaneMinBlocks)
    phased_kernel(Program program, int64_t groups) {
  extern __shared__ uint4 shared_memory[];  // 16-byte aligned
  auto* keys = reinterpret_cast<unsigned*>(shared_memory);
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
#pragma unroll
    for (int k = 0; k < Program::kPhases; ++k) {
      program.phase(k, group, keys);
      __syncthreads();
    }
  }
}
#endif

// Whether the plane scatter takes in_l's planes to out_l's: both NCHW (planes
// contiguous), an output plane of at most kMaxPlaneKeys, 32-bit indexing.
inline bool plane_scatter_fits(const Layout4d& in_l, const Layout4d& out_l, IndexWidth width) {
  const int64_t out_plane = out_l.h * out_l.w;
  return !in_l.channels_last && !out_l.channels_last && width == IndexWidth::k32 &&
         out_plane > 0 && out_plane <= kMaxPlaneKeys && out_l.n * out_l.c > 0;
}

// Runs the plane scatter if it fits; returns whether it ran (*err: the
// launch status).
template <typename Claims, typename B>
bool try_plane_scatter(const Claims& claims, const B* values, B* out, const Layout4d& in_l,
                       const Layout4d& out_l, IndexWidth width, cudaStream_t stream,
                       cudaError_t* err) {
  if (!plane_scatter_fits(in_l, out_l, width)) return false;
  const int64_t out_plane = out_l.h * out_l.w, planes = out_l.n * out_l.c;
  int sms = 0;
  *err = multiprocessors(&sms);
  if (*err != cudaSuccess) return true;
  // Whole planes per block, fewer where that leaves SMs idle.
  const int64_t per_group = std::max<int64_t>(
      1, std::min(kGroupOutputs / out_plane, (planes + 2 * sms - 1) / (2 * sms)));
  const int64_t groups = (planes + per_group - 1) / per_group;
  const PlaneScatter<Claims, B> program{
      {planes, static_cast<int32_t>(per_group), static_cast<int32_t>(in_l.h),
       static_cast<int32_t>(in_l.w), static_cast<int32_t>(out_plane)},
      claims, values, out};
  const size_t shared_bytes = per_group * out_plane * sizeof(unsigned);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(groups, int64_t{sms} * 8));
#ifdef POOLX_CUDA_EMULATION
  cuda_emulation::run_phases(blocks, kPlaneThreads, shared_bytes / sizeof(unsigned), groups,
                             program);
  *err = cudaSuccess;
#else
  const auto kernel = phased_kernel<PlaneScatter<Claims, B>>;
  *err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(shared_bytes));
  if (*err != cudaSuccess) return true;
  kernel<<<blocks, kPlaneThreads, shared_bytes, stream>>>(program, groups);
  *err = cudaGetLastError();
#endif
  return true;
}

}  // namespace cuda_launch
}  // namespace poolx
