#include "huge_pages.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace poolx {

namespace {

constexpr uintptr_t kHugePage = uintptr_t{1} << 21;

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("POOLX_HUGE_PAGES");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

}  // namespace

void advise_huge_pages(const at::Tensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (!t.defined() || !enabled()) return;
  const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
  const uintptr_t end = begin + t.nbytes();
  const uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t last = end & ~(kHugePage - 1);
  // a few pages at least, so that the system call pays for itself
  if (last < first + 2 * kHugePage) return;
  // advice only: failure (an old kernel, THP "never") changes nothing
  madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)t;
#endif
}

}  // namespace poolx
