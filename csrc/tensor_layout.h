// Layout4d of an ATen tensor that the ops layer made contiguous in its format.
#pragma once

#include <ATen/core/Tensor.h>

#include "poolx/layout.h"

namespace poolx {

inline Layout4d layout_of(const at::Tensor& t) {
  TORCH_INTERNAL_ASSERT(t.dim() == 4);
  // Where a tensor is contiguous in both formats (C == 1, or H == W == 1) the
  // two address every element alike, so NCHW is as good as any.
  const bool cl = !t.is_contiguous();
  TORCH_INTERNAL_ASSERT(!cl || t.is_contiguous(at::MemoryFormat::ChannelsLast));
  return {t.size(0), t.size(1), t.size(2), t.size(3), cl};
}

}  // namespace poolx
