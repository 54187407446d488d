#include "output_cache.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <c10/util/safe_numerics.h>

#if defined(__linux__)
#include <pthread.h>
#include <sys/mman.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <unordered_map>
#endif

namespace poolx {

#if defined(__linux__)
namespace {

constexpr size_t kMiB = size_t{1} << 20;
// Blocks are whole transparent huge pages: 512x fewer faults on first touch.
constexpr size_t kBlockAlign = 2 * kMiB;
// Smaller outputs come from glibc's heap, which keeps its memory anyway.
constexpr size_t kMinCachedBytes = kMiB;
constexpr size_t kDefaultCapMiB = 1024;

// POOLX_CPU_CACHE_MB, read once: the most bytes the cache keeps free.
size_t cap_bytes() {
  static const size_t cap = [] {
    const char* v = std::getenv("POOLX_CPU_CACHE_MB");
    if (v == nullptr || *v == '\0') return kDefaultCapMiB * kMiB;
    const size_t len = std::strlen(v);
    bool digits = len <= 9;  // up to ~1 PB: no overflow below
    for (size_t i = 0; i < len; ++i) digits = digits && std::isdigit(static_cast<unsigned char>(v[i]));
    if (!digits) {
      TORCH_WARN("poolx: POOLX_CPU_CACHE_MB must be a whole number of MiB, but got '", v,
                 "'; using the default, ", kDefaultCapMiB);
      return kDefaultCapMiB * kMiB;
    }
    return static_cast<size_t>(std::strtoull(v, nullptr, 10)) * kMiB;
  }();
  return cap;
}

struct Block {
  void* ptr;
  size_t size;
};

void unmap(const std::list<Block>& blocks) {
  for (const Block& b : blocks) munmap(b.ptr, b.size);
}

// Asks for transparent huge pages on the whole 2 MiB pages inside [p, p + n):
// 512x fewer first-touch faults. Advice only: THP off or an old kernel
// changes nothing.
void advise_huge_pages(void* p, size_t n) {
#if defined(MADV_HUGEPAGE)
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + kBlockAlign - 1) & ~(kBlockAlign - 1);
  const uintptr_t last = (begin + n) & ~(kBlockAlign - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
}

// size bytes at a 2 MiB boundary (over-map, trim both ends), or nullptr.
void* map_aligned(size_t size) {
  const size_t span = size + kBlockAlign;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (begin + kBlockAlign - 1) & ~(kBlockAlign - 1);
  const uintptr_t end = start + size;
  if (start > begin) munmap(raw, start - begin);
  if (begin + span > end) munmap(reinterpret_cast<void*>(end), begin + span - end);
  void* ptr = reinterpret_cast<void*>(start);
  advise_huge_pages(ptr, size);
  return ptr;
}

// Context == data pointer, so DataPtrs are "simple" (copy-on-write clones work).
class OutputCache final : public c10::Allocator {
 public:
  // Leaked: tensors may be freed during interpreter shutdown, after statics die.
  static OutputCache& get() {
    static OutputCache* cache = new OutputCache();
    return *cache;
  }

  c10::DataPtr allocate(size_t n) override {
    // resize_ of a cached tensor's storage can ask for little
    if (n < kMinCachedBytes) return c10::GetCPUAllocator()->allocate(n);
    TORCH_CHECK_WITH(OutOfMemoryError, n <= SIZE_MAX / 2, "poolx: cannot allocate ", n, " bytes");
    const size_t want = (n + kBlockAlign - 1) & ~(kBlockAlign - 1);
    Block b = take_free(want);
    if (b.ptr == nullptr) {
      void* ptr = map_aligned(want);
      if (ptr == nullptr) {  // the cache may be what fills memory
        release_free();
        ptr = map_aligned(want);
      }
      TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr,
                       "poolx: CPU out of memory: could not map ", want, " bytes for an output");
      b = {ptr, want};
      std::lock_guard<std::mutex> lock(mutex_);
      ++misses_;
      track_in_use(b);
    }
    report(b.ptr, static_cast<int64_t>(b.size));
    return {b.ptr, b.ptr, &free_block, c10::Device(c10::kCPU)};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  void release_free() {
    std::list<Block> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks.swap(free_);
      cached_bytes_ = 0;
    }
    unmap(blocks);  // outside the lock: unmapping large blocks takes a while
  }

  std::vector<int64_t> stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {static_cast<int64_t>(cached_bytes_), static_cast<int64_t>(in_use_bytes_), hits_,
            misses_};
  }

 private:
  OutputCache() {
    // Data loader workers fork: a lock held by another thread at fork time
    // would stay locked forever in the child.
    pthread_atfork(+[] { get().mutex_.lock(); }, +[] { get().mutex_.unlock(); },
                   +[] { get().mutex_.unlock(); });
  }

  // The smallest free block that fits without wasting more than a quarter,
  // most recently freed first among equals; {nullptr, 0} if none.
  Block take_free(size_t want) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t limit = want + want / 4;
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->size >= want && it->size <= limit && (best == free_.end() || it->size < best->size)) {
        best = it;
        if (it->size == want) break;
      }
    }
    if (best == free_.end()) return {nullptr, 0};
    const Block b = *best;
    free_.erase(best);
    cached_bytes_ -= b.size;
    ++hits_;
    track_in_use(b);
    return b;
  }

  void track_in_use(const Block& b) {
    in_use_.emplace(b.ptr, b.size);
    in_use_bytes_ += b.size;
  }

  static void free_block(void* ptr) { get().give_back(ptr); }

  // Back to the front of the free list; the least recently freed blocks go
  // back to the system while more than the cap is free.
  void give_back(void* ptr) {
    std::list<Block> evicted;
    size_t size = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = in_use_.find(ptr);
      TORCH_INTERNAL_ASSERT(it != in_use_.end(), "poolx: freeing a block the cache never gave out");
      size = it->second;
      in_use_.erase(it);
      in_use_bytes_ -= size;
      free_.push_front({ptr, size});
      cached_bytes_ += size;
      while (cached_bytes_ > cap_bytes()) {
        cached_bytes_ -= free_.back().size;
        evicted.splice(evicted.begin(), free_, std::prev(free_.end()));
      }
    }
    unmap(evicted);
    report(ptr, -static_cast<int64_t>(size));
  }

  // For torch.profiler(profile_memory=True), as torch's CPU allocator does.
  void report(void* ptr, int64_t delta) {
    if (!c10::memoryProfilingEnabled()) return;
    size_t in_use = 0, reserved = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_use = in_use_bytes_;
      reserved = in_use_bytes_ + cached_bytes_;
    }
    c10::reportMemoryUsageToProfiler(ptr, delta, in_use, reserved, c10::Device(c10::kCPU));
  }

  std::mutex mutex_;
  std::list<Block> free_;  // most recently freed first
  std::unordered_map<void*, size_t> in_use_;
  size_t cached_bytes_ = 0;
  size_t in_use_bytes_ = 0;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

}  // namespace

at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& opts) {
  const bool plain_cpu =
      opts.device().is_cpu() && opts.layout() == at::kStrided && !opts.pinned_memory();
  if (!plain_cpu) return at::empty(sizes, opts);
  uint64_t numel = 0;
  // an overflowing size is left to at::empty's error
  if (c10::safe_multiplies_u64(sizes, &numel) ||
      numel * opts.dtype().itemsize() < kMinCachedBytes) {
    return at::empty(sizes, opts);
  }
  if (cap_bytes() == 0) {  // off: torch's allocator, still with huge pages
    at::Tensor out = at::empty(sizes, opts);
    advise_huge_pages(out.data_ptr(), out.nbytes());
    return out;
  }
  return at::detail::empty_generic(sizes, &OutputCache::get(),
                                   c10::DispatchKeySet(c10::DispatchKey::CPU),
                                   c10::typeMetaToScalarType(opts.dtype()),
                                   opts.memory_format_opt());
}

void empty_cpu_cache() { OutputCache::get().release_free(); }

std::vector<int64_t> cpu_cache_stats() { return OutputCache::get().stats(); }

#else  // no mmap: outputs come from torch's allocator

at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& opts) {
  return at::empty(sizes, opts);
}

void empty_cpu_cache() {}

std::vector<int64_t> cpu_cache_stats() { return {0, 0, 0, 0}; }

#endif

}  // namespace poolx
