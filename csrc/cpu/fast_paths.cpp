// Picks the fast paths of the widest instruction set that both this CPU and
// this PyTorch allow (torch's own choice, so ATEN_CPU_CAPABILITY=avx2 or
// =default also steers poolx), and adapts tensors to their plain arguments.
#include "fast_paths.h"

#include <ATen/Version.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "../tensor_layout.h"

namespace poolx {

const FastPaths& cpu_fast_paths() {
  static const FastPaths& chosen = []() -> const FastPaths& {
#if defined(__x86_64__) || defined(_M_X64)
    const std::string cap = at::get_cpu_capability();  // "DEFAULT", "AVX2", "AVX512"
    if (cap == "AVX512") return isa_avx512::fast_paths();
    if (cap == "AVX2") return isa_avx2::fast_paths();
#endif
    return isa_default::fast_paths();
  }();
  return chosen;
}

namespace {

// A sixth of the last-level cache: an op moving less may find its output
// still cached on the next call (or by the next op), and ordinary stores then
// beat streaming ones. Measured on a 480 MiB L3, 2 threads: backwards moving
// 67-71 MB (vgg-512 float32, vgg-256 bfloat16) 10-20% slower streamed, those
// moving 108-206 MB (unet, vgg-256 float32) 1.4-2.6x faster; the bfloat16
// seed forward (92 MB) 7% faster streamed.
int64_t default_stream_min_bytes() {
#ifdef _SC_LEVEL3_CACHE_SIZE
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#else
  const long llc = 0;
#endif
  return std::max<int64_t>(int64_t{32} << 20, llc > 0 ? llc / 6 : 0);
}

std::atomic<int64_t> g_stream_min_bytes{default_stream_min_bytes()};

}  // namespace

int64_t stream_min_bytes() { return g_stream_min_bytes.load(std::memory_order_relaxed); }

int64_t set_stream_min_bytes(int64_t bytes) {
  return g_stream_min_bytes.exchange(bytes < 0 ? default_stream_min_bytes() : bytes);
}

bool fast_forward(const at::Tensor& input, const at::Tensor& values, const at::Tensor& argmax,
                  const Pool2dGeometry& g) {
  if (argmax.defined() && argmax.scalar_type() != at::kByte) return false;
  const FastForwardArgs args{input.scalar_type(),
                             layout_of(input),
                             layout_of(values),
                             input.const_data_ptr(),
                             values.mutable_data_ptr(),
                             argmax.defined() ? argmax.mutable_data_ptr<uint8_t>() : nullptr,
                             g};
  return cpu_fast_paths().forward(args);
}

namespace {

FastBackwardArgs routing_args(const at::Tensor& from, const at::Tensor& argmax,
                              const at::Tensor& to, const Pool2dGeometry& g) {
  return {from.scalar_type(),  layout_of(from),      layout_of(to),
          from.const_data_ptr(), argmax.const_data_ptr<uint8_t>(), to.mutable_data_ptr(),
          g};
}

}  // namespace

bool fast_backward(const at::Tensor& grad_output, const at::Tensor& argmax,
                   const at::Tensor& grad_input, const Pool2dGeometry& g) {
  return argmax.scalar_type() == at::kByte &&
         cpu_fast_paths().backward(routing_args(grad_output, argmax, grad_input, g));
}

bool fast_unpool_argmax(const at::Tensor& values, const at::Tensor& argmax, const at::Tensor& out,
                        const Pool2dGeometry& g) {
  return argmax.scalar_type() == at::kByte &&
         cpu_fast_paths().unpool_argmax(routing_args(values, argmax, out, g));
}

}  // namespace poolx
