// Parallel traversal of a 4-D tensor in memory order, a row at a time, so the
// per-element body sees consecutive offsets and index math stays per row.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>

#include "poolx/layout.h"

namespace poolx {

// body(n, c, h, w, offset) for every element of `l`, rows split across threads.
template <typename Body>
void parallel_for_each_element(const Layout4d& l, const Body& body) {
  const int64_t row_len = l.channels_last ? l.c : l.w;
  const int64_t rows = l.numel() / row_len;
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / row_len);
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t base = r * row_len;
      if (l.channels_last) {
        const int64_t w = r % l.w, h = (r / l.w) % l.h, n = r / (l.w * l.h);
        for (int64_t c = 0; c < l.c; ++c) body(n, c, h, w, base + c);
      } else {
        const int64_t h = r % l.h, c = (r / l.h) % l.c, n = r / (l.h * l.c);
        for (int64_t w = 0; w < l.w; ++w) body(n, c, h, w, base + w);
      }
    }
  });
}

}  // namespace poolx
