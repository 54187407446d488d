// Launch helpers shared by the poolx CUDA kernels: grid-stride loops, the
// generic one-thread-per-element kernel, and vector loads/stores.
#pragma once

#include <c10/macros/Macros.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "poolx/geometry.h"
#include "poolx/layout.h"

// X-macros over the element types a launcher is instantiated for.
#define POOLX_CUDA_GRAD_TYPES(M) M(float) M(double) M(c10::Half) M(c10::BFloat16)
#define POOLX_CUDA_POOLED_TYPES(M) \
  POOLX_CUDA_GRAD_TYPES(M) M(uint8_t) M(int8_t) M(int16_t) M(int32_t) M(int64_t)

// Device-side assert (as torch's for bad unpool indices) where an argmax value
// names no tap of its window inside the input.
#define POOLX_ASSERT_ARGMAX(valid) \
  CUDA_KERNEL_ASSERT(              \
      (valid) && "poolx: an argmax value names no tap of its window inside the input")

namespace poolx {
namespace cuda_launch {

constexpr int kThreads = 256;
// Naming a minimum number of resident blocks in __launch_bounds__ stops ptxas
// from capping registers on its own (it then spills at 40-48 registers on
// sm_100/sm_120); these kernels need at most ~70 registers anyway.
constexpr int kMinBlocks = 1;

__device__ __forceinline__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// body(out_row, ow0) for every group of V adjacent outputs of one output row
// (out_row = plane * out_h + oh; ow0 its first column), grid-stride: the
// tiled NCHW kernels' walk (out_w % V == 0).
template <int V, typename Body>
__device__ __forceinline__ void for_each_row_group(int64_t planes, const Pool2dGeometry& g,
                                                   Body body) {
  const int64_t groups_per_row = g.out_w / V;
  const int64_t total = planes * g.out_h * groups_per_row;
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t out_row = div_nonneg(t, groups_per_row);
    body(out_row, (t - out_row * groups_per_row) * V);
  }
}

// The current device's multiprocessor count.
inline cudaError_t multiprocessors(int* sms) {
  int device = 0;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  return cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device);
}

// Blocks for `work` items: one item per thread, capped at a few waves of
// resident blocks (the grid-stride loops cover the rest).
inline cudaError_t blocks_for(int64_t work, unsigned* blocks) {
  int sms = 0;
  const cudaError_t err = multiprocessors(&sms);
  if (err != cudaSuccess) return err;
  const int64_t needed = (work + kThreads - 1) / kThreads;
  *blocks = static_cast<unsigned>(std::min<int64_t>(needed, int64_t{sms} * 32));
  return cudaSuccess;
}

// The index type of a generic kernel. 64-bit products and divisions cost
// several instructions each, and the generic kernels are bound by their index
// arithmetic, so they index in 32 bits wherever nothing can overflow: every
// tensor of at most 2^30 elements, every window quantity below 2^28 (sums
// and products of the element functions then stay below 2^31) and fewer than
// 2^30 taps per window.
enum class IndexWidth { k32, k64 };

inline IndexWidth index_width(const Layout4d& a, const Layout4d& b) {
  constexpr int64_t kMaxElements = int64_t{1} << 30;
  return a.numel() <= kMaxElements && b.numel() <= kMaxElements ? IndexWidth::k32
                                                                 : IndexWidth::k64;
}

inline IndexWidth index_width(const Layout4d& a, const Layout4d& b, const Pool2dGeometry& g) {
  constexpr int64_t kMaxExtent = int64_t{1} << 28;
  const int64_t extents[] = {g.in_h,     g.in_w,     g.out_h,    g.out_w,
                             g.kernel_h, g.kernel_w, g.stride_h, g.stride_w,
                             g.pad_h,    g.pad_w,    g.dilation_h, g.dilation_w,
                             g.in_d,     g.out_d,    g.kernel_d,   g.stride_d,
                             g.pad_d,    g.dilation_d};
  for (const int64_t e : extents) {
    if (e >= kMaxExtent) return IndexWidth::k64;
  }
  if (g.window_size() > int64_t{1} << 30) return IndexWidth::k64;
  return index_width(a, b);
}

// body(n, c, h, w, offset) for every element of `l`, one thread per element,
// with coordinates of type I: the CUDA counterpart of the CPU's
// parallel_for_each_element. With a `gate`, only if *gate is nonzero (a
// decision made on the device, without a host sync).
template <typename I, typename Body>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    for_each_element_kernel(Layout4d l64, Body body, const unsigned* gate) {
  if (gate != nullptr && *gate == 0) return;
  const Layout4dT<I> l = l64.as<I>();
  const I total = l.numel();  // fits: with I = int32_t, total + grid_stride() < 2^31 too
  for (I i = static_cast<I>(first_index()); i < total; i += static_cast<I>(grid_stride())) {
    const auto p = l.coord(i);
    body(p.n, p.c, p.h, p.w, i);
  }
}

// Launches `kernel` over `work` items (grid-stride) and returns the launch status.
template <typename Kernel, typename... Args>
cudaError_t launch(Kernel kernel, int64_t work, cudaStream_t stream, Args... args) {
  unsigned blocks = 0;
  const cudaError_t err = blocks_for(work, &blocks);
  if (err != cudaSuccess || blocks == 0) return err;
#ifdef POOLX_CUDA_EMULATION
  cuda_emulation::run_grid(blocks, kThreads, [&] { kernel(args...); });
#else
  kernel<<<blocks, kThreads, 0, stream>>>(args...);
#endif
  return cudaGetLastError();
}

template <typename Body>
cudaError_t launch_for_each_element(const Layout4d& l, const Body& body, IndexWidth width,
                                    cudaStream_t stream, const unsigned* gate = nullptr) {
  return width == IndexWidth::k32
             ? launch(for_each_element_kernel<int32_t, Body>, l.numel(), stream, l, body, gate)
             : launch(for_each_element_kernel<int64_t, Body>, l.numel(), stream, l, body, gate);
}

// The unsigned type of T's size: unpool moves elements as bits.
template <typename T>
using Bits = std::conditional_t<
    sizeof(T) == 1, uint8_t,
    std::conditional_t<sizeof(T) == 2, uint16_t,
                       std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;

// Vector memory access: N elements moved in chunks of at most 16 bytes, each
// chunk one load/store instruction. Pointers must be aligned to chunk_bytes
// (a GPU faults otherwise; the emulation build checks).
#ifdef POOLX_CUDA_EMULATION
#define POOLX_CHECK_VECTOR_ACCESS(p, bytes) cuda_emulation::check_vector_access(p, bytes)
#else
#define POOLX_CHECK_VECTOR_ACCESS(p, bytes)
#endif
template <int Bytes>
struct RawVec;
template <>
struct RawVec<1> {
  using type = uint8_t;
};
template <>
struct RawVec<2> {
  using type = uint16_t;
};
template <>
struct RawVec<4> {
  using type = uint32_t;
};
template <>
struct RawVec<8> {
  using type = uint2;
};
template <>
struct RawVec<16> {
  using type = uint4;
};

template <typename T, int N>
constexpr int chunk_bytes() {
  return N * sizeof(T) < 16 ? N * static_cast<int>(sizeof(T)) : 16;
}

inline bool aligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

template <int N, typename T>
__device__ __forceinline__ void load_vectors(const T* __restrict__ src, T* dst) {
  constexpr int kChunk = chunk_bytes<T, N>() / sizeof(T);
  using R = typename RawVec<chunk_bytes<T, N>()>::type;
#pragma unroll
  for (int i = 0; i < N; i += kChunk) {
    POOLX_CHECK_VECTOR_ACCESS(src + i, sizeof(R));
    const R raw = *reinterpret_cast<const R*>(src + i);
    memcpy(dst + i, &raw, sizeof(R));
  }
}

template <int N, typename T>
__device__ __forceinline__ void store_vectors(T* __restrict__ dst, const T* src) {
  constexpr int kChunk = chunk_bytes<T, N>() / sizeof(T);
  using R = typename RawVec<chunk_bytes<T, N>()>::type;
#pragma unroll
  for (int i = 0; i < N; i += kChunk) {
    R raw;
    memcpy(&raw, src + i, sizeof(R));
    POOLX_CHECK_VECTOR_ACCESS(dst + i, sizeof(R));
    *reinterpret_cast<R*>(dst + i) = raw;
  }
}

}  // namespace cuda_launch
}  // namespace poolx
