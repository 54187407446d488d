// A caching allocator for the large CPU tensors that poolx's ops return.
// glibc maps blocks above 32 MiB anew for every allocation and unmaps them on
// free, so each call would page-fault its whole output in and have the kernel
// zero-fill it: a hidden pass that costs more than the pooling itself. Freed
// outputs of 1 MiB and more are kept here (up to POOLX_CPU_CACHE_MB, default
// 1024; 0 turns the cache off) and handed to the next output that fits.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace poolx {

// An uninitialized tensor for an op's output, in opts' memory format: from the
// cache when opts is CPU and the cache is on, else at::empty. A reused block
// holds stale data, so the op must write every element.
at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& opts);

// Unmaps every cached block that no tensor uses.
void empty_cpu_cache();

// {cached_bytes, in_use_bytes, hits, misses}: bytes held free, bytes of live
// tensors from the cache, allocations served from it, blocks newly mapped.
std::vector<int64_t> cpu_cache_stats();

}  // namespace poolx
