// Unpool by int64 flat indices on the CPU: a scatter per plane with the
// zero-fill folded in, deterministic on any number of threads.
#include "unpool_indices.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>

#include "../tensor_layout.h"

namespace poolx {
namespace {

using at::Tensor;

[[noreturn]] C10_NOINLINE void invalid_unpool_index(int64_t index, int64_t out_h, int64_t out_w) {
  TORCH_CHECK(false, "max_unpool2d: Found an invalid max index: ", index,
              " (output volumes are of size ", out_h, "x", out_w, ")");
}

// Stores one pixel's channels at their target pixels (channels_last), each
// channel once, so a plane's stores keep the input order.
template <typename bits_t>
void store_pixel_channels(const int64_t* targets, const bits_t* values, bits_t* out,
                          int64_t channels, int64_t stride) {
  for (int64_t j = 0; j < channels; ++j) out[targets[j] * stride + j] = values[j];
}

// One task of the unpool by flat index: `channels` planes whose element
// (pixel p, channel j) lies at p * stride + j, in the input and the output
// (NCHW: one plane, stride 1; channels_last: a block of channels of one
// image, stride C). Values move as bits (bits_t: an unsigned type of their
// size), so NaN payloads and -0.0 stay as they are.
//
// The zero-fill is folded into the scatter: the task zeroes its output only
// up to the furthest pixel written so far (a block at a time), so each output
// line is zeroed just before it is written and leaves the cache once, instead
// of a whole-output fill that the scatter reads back. Writes go in input
// order within each plane, so the last write wins (torch's CPU rule on one
// thread) on any number of threads.
template <typename bits_t, bool kChannelsLast>
void unpool_task(const bits_t* v, const int64_t* idx, bits_t* out,
                                  int64_t in_pixels, int64_t out_h, int64_t out_w,
                                  int64_t channels_arg, int64_t stride_arg) {
  constexpr int64_t kZeroAhead = 256;  // pixels
  const int64_t channels = kChannelsLast ? channels_arg : 1;
  const int64_t stride = kChannelsLast ? stride_arg : 1;
  const int64_t out_pixels = out_h * out_w;
  int64_t zeroed = 0;
  const auto zero_until = [&](int64_t end) {
    if (channels == stride) {  // whole pixels: one run of memory
      std::memset(static_cast<void*>(out + zeroed * stride), 0,
                  (end - zeroed) * stride * sizeof(bits_t));
    } else {
      for (int64_t p = zeroed; p < end; ++p) std::fill_n(out + p * stride, channels, bits_t(0));
    }
    zeroed = end;
  };
  for (int64_t q = 0; q < in_pixels; ++q) {
    const int64_t* targets = idx + q * stride;
    const bits_t* values = v + q * stride;
    // a pixel's checks first, as whole vectors; then its stores
    uint64_t furthest = 0;
    for (int64_t j = 0; j < channels; ++j) {
      furthest = std::max(furthest, static_cast<uint64_t>(targets[j]));  // negatives: huge
    }
    if (C10_UNLIKELY(furthest >= static_cast<uint64_t>(out_pixels))) {
      for (int64_t j = 0; j < channels; ++j) {
        if (static_cast<uint64_t>(targets[j]) >= static_cast<uint64_t>(out_pixels)) {
          invalid_unpool_index(targets[j], out_h, out_w);
        }
      }
    }
    if (static_cast<int64_t>(furthest) >= zeroed) {
      zero_until(std::min<int64_t>(out_pixels, furthest + kZeroAhead));
    }
    if (kChannelsLast) {
      store_pixel_channels(targets, values, out, channels, stride);
    } else {
      out[targets[0]] = values[0];
    }
  }
  zero_until(out_pixels);
}

template <typename bits_t>
void unpool_tasks(const Tensor& values, const Tensor& indices, const Tensor& out) {
  const Layout4d in_l = layout_of(values), out_l = layout_of(out);
  const int64_t in_pixels = in_l.h * in_l.w, out_pixels = out_l.h * out_l.w;
  // NCHW: a task per plane. channels_last: a task per image, or per block of
  // whole cache lines of channels when there are fewer images than threads.
  int64_t block = 1;
  if (in_l.channels_last) {
    const int64_t line = std::max<int64_t>(1, 64 / sizeof(bits_t));
    const int64_t blocks = std::max<int64_t>(1, 2 * at::get_num_threads() / in_l.n);
    const int64_t per_block = (in_l.c + blocks - 1) / blocks;
    block = std::min(in_l.c, (per_block + line - 1) / line * line);
  }
  const int64_t blocks_per_image = (in_l.c + block - 1) / block;
  const auto* v = static_cast<const bits_t*>(values.const_data_ptr());
  const int64_t* idx = indices.const_data_ptr<int64_t>();
  auto* o = static_cast<bits_t*>(out.mutable_data_ptr());
  at::parallel_for(0, in_l.n * blocks_per_image, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t n = task / blocks_per_image, c0 = task % blocks_per_image * block;
      // channels_last: the image's first pixel at channel c0; NCHW: plane (n, c0)
      const int64_t c_step_in = in_l.channels_last ? 1 : in_pixels;
      const int64_t c_step_out = in_l.channels_last ? 1 : out_pixels;
      const int64_t in_first = n * in_l.c * in_pixels + c0 * c_step_in;
      const int64_t out_first = n * in_l.c * out_pixels + c0 * c_step_out;
      if (in_l.channels_last) {
        unpool_task<bits_t, true>(v + in_first, idx + in_first, o + out_first, in_pixels,
                                  out_l.h, out_l.w, std::min(block, in_l.c - c0), in_l.c);
      } else {
        unpool_task<bits_t, false>(v + in_first, idx + in_first, o + out_first, in_pixels,
                                   out_l.h, out_l.w, 1, 1);
      }
    }
  });
}

}  // namespace

void max_unpool2d_indices_cpu(const Tensor& values, const Tensor& indices, const Tensor& out) {
  switch (values.element_size()) {
    case 1: return unpool_tasks<uint8_t>(values, indices, out);
    case 2: return unpool_tasks<uint16_t>(values, indices, out);
    case 4: return unpool_tasks<uint32_t>(values, indices, out);
    default: TORCH_INTERNAL_ASSERT(values.element_size() == 8);
             return unpool_tasks<uint64_t>(values, indices, out);
  }
}

}  // namespace poolx
