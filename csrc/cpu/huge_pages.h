// Fresh outputs of hundreds of MB otherwise fault in 4 KB at a time: glibc
// maps large blocks anew for every allocation, and on a kernel whose
// transparent huge pages are "madvise" each 4 KB page costs a fault (more
// time than writing it). Asking for huge pages on the output's interior cuts
// the faults 512-fold; the contents and the allocation are untouched.
#pragma once

namespace at {
class Tensor;
}

namespace poolx {

// madvise(MADV_HUGEPAGE) on the whole 2 MB pages inside `t`'s bytes, for
// tensors large enough to hold some; a no-op elsewhere, off Linux, or with
// POOLX_HUGE_PAGES=0 in the environment.
void advise_huge_pages(const at::Tensor& t);

}  // namespace poolx
