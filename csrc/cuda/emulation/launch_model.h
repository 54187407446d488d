// The CUDA launch model on the CPU, for the emulation build
// (POOLX_CUDA_EMULATION=1, see setup.py): the unmodified kernels in
// csrc/cuda/*.cu compile with the host compiler against this header, and the
// test suite runs them on CPU tensors.
//
// It executes every (block, thread) of a grid, one thread after another, and
// makes the GPU's failure modes visible on the CPU: blocks and the threads of
// a block run in reverse or shuffled order (a kernel that depends on order
// fails), the device reports one multiprocessor (grids stay small, so
// grid-stride loops stride), a vector access that a GPU would fault on for
// misalignment raises, and a device-side assert raises instead of aborting
// the process. A kernel without barriers runs each thread to completion, one
// at a time (a legal schedule); the one kernel with block barriers and shared
// memory (plane_scatter.cuh) is written as phases, and every thread of a
// block finishes a phase before any starts the next.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
using uint3 = dim3;
// CUDA's vector types and their alignment (a misaligned access faults).
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

// The built-in variables of the thread now running.
inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;

inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<uint64_t>(x)); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }

// Threads run one at a time, so an atomic is a plain read-modify-write.
template <typename T>
T atomicMax(T* address, T value) {
  const T old = *address;
  if (value > old) *address = value;
  return old;
}

using cudaError_t = int;
constexpr cudaError_t cudaSuccess = 0;
constexpr cudaError_t cudaErrorMisalignedAddress = 716;
using cudaStream_t = struct EmulatedStream*;
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };

inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t err) {
  return err == cudaSuccess ? "no error" : "error (emulated CUDA)";
}
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  *value = attr == cudaDevAttrMultiProcessorCount ? 1 : 0;
  return cudaSuccess;
}
// CUDA takes any pointer for 0 bytes (an empty tensor's is null); memset does not.
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
  if (bytes > 0) std::memset(p, value, bytes);
  return cudaSuccess;
}

namespace poolx {
namespace cuda_emulation {

// What a GPU reports as a failed launch or a device-side assert.
struct DeviceFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void device_assert_failed(const char* condition, const char* file, int line) {
  throw DeviceFault(std::string("CUDA error: device-side assert triggered (emulated): ") +
                    condition + " at " + file + ":" + std::to_string(line));
}

// A GPU faults on a vector access that is not aligned to its size.
inline void check_vector_access(const void* p, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {
    throw DeviceFault("CUDA error: misaligned address (emulated): a " + std::to_string(bytes) +
                      "-byte vector access at " + std::to_string(reinterpret_cast<uintptr_t>(p)));
  }
}

// 0, 1, ..., n - 1 in reverse (launch 0, 2, 4, ...) or in an order drawn
// afresh (launch 1, 3, 5, ...).
inline std::vector<unsigned> run_order(unsigned n, uint64_t launch, std::mt19937& rng) {
  std::vector<unsigned> order(n);
  std::iota(order.begin(), order.end(), 0u);
  if (launch % 2 == 0) {
    std::reverse(order.begin(), order.end());
  } else {
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

// Runs `thread_body` once for every thread of a 1-D grid.
template <typename ThreadBody>
void run_grid(unsigned blocks, unsigned threads, const ThreadBody& thread_body) {
  static std::atomic<uint64_t> launches{0};
  const uint64_t launch = launches++;
  std::mt19937 rng(static_cast<uint32_t>(launch));
  gridDim = dim3{blocks, 1, 1};
  blockDim = dim3{threads, 1, 1};
  for (unsigned b : run_order(blocks, launch, rng)) {
    blockIdx = uint3{b, 0, 0};
    for (unsigned t : run_order(threads, launch, rng)) {
      threadIdx = uint3{t, 0, 0};
      thread_body();
    }
  }
}

// Runs a block program of Program::kPhases phases with a barrier after each
// (plane_scatter.cuh's phased_kernel) for `groups` groups, grid-stride, with
// `shared_words` of shared memory per block, which starts as garbage, as on a
// GPU.
template <typename Program>
void run_phases(unsigned blocks, unsigned threads, size_t shared_words, int64_t groups,
                const Program& program) {
  static std::atomic<uint64_t> launches{0};
  const uint64_t launch = launches++;
  std::mt19937 rng(static_cast<uint32_t>(launch));
  gridDim = dim3{blocks, 1, 1};
  blockDim = dim3{threads, 1, 1};
  // 16-byte aligned, as the kernel's `extern __shared__ uint4`
  std::vector<uint4> shared((shared_words + 3) / 4);
  auto* words = reinterpret_cast<unsigned*>(shared.data());
  for (unsigned b : run_order(blocks, launch, rng)) {
    blockIdx = uint3{b, 0, 0};
    for (int64_t group = b; group < groups; group += blocks) {
      std::fill(words, words + 4 * shared.size(), 0xDEADBEEFu);
      for (int k = 0; k < Program::kPhases; ++k) {
        for (unsigned t : run_order(threads, launch + k, rng)) {
          threadIdx = uint3{t, 0, 0};
          program.phase(k, group, words);
        }
      }
    }
  }
}

}  // namespace cuda_emulation
}  // namespace poolx
