// Vectorized CPU kernels for the common cases, compiled once per instruction
// set (csrc/cpu/isa/*.cpp) and picked at run time. Arguments are plain
// pointers and sizes so that no ATen tensor code is compiled with ISA flags.
#pragma once

#include <c10/core/ScalarType.h>

#include <atomic>

#include "poolx/geometry.h"
#include "poolx/layout.h"

namespace poolx {

class IndexRows;

struct FastForwardArgs {
  c10::ScalarType dtype;
  Layout4d in_l, out_l;
  const void* input;
  void* values;
  uint8_t* argmax;  // null: values only
  Pool2dGeometry g;
  // return_indices: converts each output row's argmax into torch's indices
  // once the row is written (csrc/cpu/index_rows.h); null otherwise
  const IndexRows* index_rows = nullptr;
};

struct FastBackwardArgs {
  c10::ScalarType dtype;
  Layout4d out_l, in_l;
  const void* grad_output;
  const uint8_t* argmax;
  void* grad_input;
  Pool2dGeometry g;
  // set where argmax holds a value that names no tap of its window inside the
  // input (grad_input is then garbage, never written out of bounds)
  std::atomic<bool>* argmax_invalid;
  // unpool_argmax by torch's int64 indices instead of argmax, windows as g
  // supposes (kernel == stride): argmax_invalid is set where an index lies
  // outside its window
  const int64_t* indices = nullptr;
};

// Unpool in channels_last where the windows (kernel_h x kernel_w, stride =
// kernel) tile the output: csrc/cpu/isa/unpool_tiled.h.
struct TiledUnpoolArgs {
  int64_t bytes;  // element size
  int64_t n, channels, pooled_h, pooled_w, out_h, out_w, kernel_h, kernel_w;
  const void* values;      // null: a bool mask (stores 1)
  const int64_t* indices;  // flat positions in the output plane, or null:
  const uint8_t* argmax;   // the selected taps
  void* out;
};

// Each returns false, having written nothing, when it does not cover the
// problem; the caller then runs the per-element kernels.
struct FastPaths {
  const char* isa;
  bool (*forward)(const FastForwardArgs&);
  bool (*backward)(const FastBackwardArgs&);
  // grad_output holds the values to unpool, grad_input receives them
  // (keyed by indices where those are given)
  bool (*unpool_argmax)(const FastBackwardArgs&);
  // false (the output partly written) where a key names no element of its
  // window; the caller then scatters
  bool (*unpool_tiled)(const TiledUnpoolArgs&);
  // the backward by volume_scatter.h's scatter (its kernel compiled with the
  // ISA's 16-bit conversions), for the types above
  bool (*scatter_add)(const FastBackwardArgs&);
};

namespace isa_default { const FastPaths& fast_paths(); }
namespace isa_avx2 { const FastPaths& fast_paths(); }
namespace isa_avx512 { const FastPaths& fast_paths(); }

// The widest instruction set this CPU (and this build) supports, or, while
// they are off, paths that cover nothing.
const FastPaths& cpu_fast_paths();
// Turns the fast paths on or off (for the benchmark); returns the previous state.
bool set_fast_paths_enabled(bool enabled);

// Whether the widest fast paths are the AVX-512 set: code outside csrc/cpu/isa that
// has an AVX-512 variant (compiled with POOLX_TARGET_AVX512) takes it only then.
bool cpu_has_avx512();
// The same for AVX2 (POOLX_TARGET_AVX2): the AVX2 set or a wider one.
bool cpu_has_avx2();

#if defined(__x86_64__) && defined(__GNUC__)
#define POOLX_HAS_TARGET_AVX512 1
#define POOLX_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define POOLX_TARGET_AVX2 __attribute__((target("avx2")))
#else
#define POOLX_TARGET_AVX512
#define POOLX_TARGET_AVX2
#endif

// Outputs of at least this many bytes are written with streaming stores
// (csrc/cpu/isa/stream_stores.h). set_ returns the previous value; a negative
// value restores the default.
int64_t stream_min_bytes();
int64_t set_stream_min_bytes(int64_t bytes);

}  // namespace poolx

namespace at {
class Tensor;
}

namespace poolx {

// The kernels' arguments (see csrc/kernels.h) through the fast paths; false
// where they do not apply. Those that take an argmax check it and set
// *argmax_invalid where a value names no tap of its window inside the input.
bool fast_forward(const at::Tensor& input, const at::Tensor& values, const at::Tensor& argmax,
                  const at::Tensor& indices, const Pool2dGeometry& g);
bool fast_backward(const at::Tensor& grad_output, const at::Tensor& argmax,
                   const at::Tensor& grad_input, const Pool2dGeometry& g,
                   std::atomic<bool>* argmax_invalid);
bool fast_scatter_add(const at::Tensor& grad_output, const at::Tensor& argmax,
                      const at::Tensor& grad_input, const Pool2dGeometry& g,
                      std::atomic<bool>* argmax_invalid);
bool fast_unpool_argmax(const at::Tensor& values, const at::Tensor& argmax, const at::Tensor& out,
                        const Pool2dGeometry& g, std::atomic<bool>* argmax_invalid);
// Unpool (values undefined: the mask) where windows tile the output and every
// key lies in its window; false, the output partly written, elsewhere.
bool fast_unpool_indices(const at::Tensor& values, const at::Tensor& indices,
                         const at::Tensor& out);
bool fast_unpool_by_argmax(const at::Tensor& values, const at::Tensor& argmax,
                           const at::Tensor& out, const Pool2dGeometry& g);

}  // namespace poolx
