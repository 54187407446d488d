// Picks the fast paths of the widest instruction set that both this CPU and
// this PyTorch allow (torch's own choice, so ATEN_CPU_CAPABILITY=avx2 or
// =default also steers poolx), and adapts tensors to their plain arguments.
#include "fast_paths.h"

#include <ATen/Version.h>
#include <atomic>
#include <cstring>
#include <optional>

#include "../tensor_layout.h"
#include "index_rows.h"

namespace poolx {

namespace {

const FastPaths& widest_fast_paths() {
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

// Off: every problem takes the element kernels, which the benchmark's
// "generic" peer measures each fast path against.
std::atomic<bool> g_fast_paths_enabled{true};

template <typename Args>
bool declines(const Args&) {
  return false;
}

}  // namespace

const FastPaths& cpu_fast_paths() {
  static const FastPaths none{"none", declines<FastForwardArgs>, declines<FastBackwardArgs>,
                              declines<FastBackwardArgs>, declines<TiledUnpoolArgs>,
                              declines<FastBackwardArgs>};
  return g_fast_paths_enabled.load(std::memory_order_relaxed) ? widest_fast_paths() : none;
}

bool set_fast_paths_enabled(bool enabled) { return g_fast_paths_enabled.exchange(enabled); }

bool cpu_has_avx512() {
  static const bool avx512 = std::strcmp(widest_fast_paths().isa, "avx512") == 0;
  return avx512;
}

bool cpu_has_avx2() {
  static const bool avx2 = cpu_has_avx512() || std::strcmp(widest_fast_paths().isa, "avx2") == 0;
  return avx2;
}

namespace {

// Below 8 MiB an output may well be read again from the caches by the next
// op. Whole training steps favour streaming from there on, though the op
// repeated alone on a large L3 runs faster without it: its output stays
// cached from call to call, as it would not in a network.
constexpr int64_t kDefaultStreamMinBytes = int64_t{8} << 20;

std::atomic<int64_t> g_stream_min_bytes{kDefaultStreamMinBytes};

}  // namespace

int64_t stream_min_bytes() { return g_stream_min_bytes.load(std::memory_order_relaxed); }

int64_t set_stream_min_bytes(int64_t bytes) {
  return g_stream_min_bytes.exchange(bytes < 0 ? kDefaultStreamMinBytes : bytes);
}

namespace {

// The two layouts of tensors made in one memory format, which the fast paths
// assume they share: where one reads as NCHW only because it is contiguous
// in both formats (C == 1, or H == W == 1: either addresses it alike), it
// takes the other's channels_last.
std::pair<Layout4d, Layout4d> shared_layouts(const at::Tensor& a, const at::Tensor& b) {
  Layout4d la = layout_of(a), lb = layout_of(b);
  la.channels_last = lb.channels_last = la.channels_last || lb.channels_last;
  return {la, lb};
}

}  // namespace

bool fast_forward(const at::Tensor& input, const at::Tensor& values, const at::Tensor& argmax,
                  const at::Tensor& indices, const Pool2dGeometry& g) {
  if (argmax.defined() && argmax.scalar_type() != at::kByte) return false;
  const auto [in_l, out_l] = shared_layouts(input, values);
  if (indices.defined() && !IndexRows::applies(g, out_l.channels_last)) return false;
  uint8_t* am = argmax.defined() ? argmax.mutable_data_ptr<uint8_t>() : nullptr;
  std::optional<IndexRows> index_rows;
  if (indices.defined()) index_rows.emplace(am, indices.mutable_data_ptr<int64_t>(), out_l, g);
  const FastForwardArgs args{input.scalar_type(), in_l, out_l, input.const_data_ptr(),
                             values.mutable_data_ptr(), am, g,
                             index_rows ? &*index_rows : nullptr};
  return cpu_fast_paths().forward(args);
}

namespace {

FastBackwardArgs routing_args(const at::Tensor& from, const at::Tensor& argmax,
                              const at::Tensor& to, const Pool2dGeometry& g,
                              std::atomic<bool>* argmax_invalid) {
  const auto [from_l, to_l] = shared_layouts(from, to);
  return {from.scalar_type(),    from_l,
          to_l,                  from.const_data_ptr(),
          argmax.const_data_ptr<uint8_t>(), to.mutable_data_ptr(),
          g,                     argmax_invalid};
}

// An entry of FastPaths that routes by argmax.
using RoutingPath = bool (*FastPaths::*)(const FastBackwardArgs&);

// `from` routed into `to` by the fast paths' `path` (uint8 argmax alone).
bool route(RoutingPath path, const at::Tensor& from, const at::Tensor& argmax,
           const at::Tensor& to, const Pool2dGeometry& g, std::atomic<bool>* argmax_invalid) {
  return argmax.scalar_type() == at::kByte &&
         (cpu_fast_paths().*path)(routing_args(from, argmax, to, g, argmax_invalid));
}

}  // namespace

bool fast_backward(const at::Tensor& grad_output, const at::Tensor& argmax,
                   const at::Tensor& grad_input, const Pool2dGeometry& g,
                   std::atomic<bool>* argmax_invalid) {
  return route(&FastPaths::backward, grad_output, argmax, grad_input, g, argmax_invalid);
}

bool fast_scatter_add(const at::Tensor& grad_output, const at::Tensor& argmax,
                      const at::Tensor& grad_input, const Pool2dGeometry& g,
                      std::atomic<bool>* argmax_invalid) {
  return route(&FastPaths::scatter_add, grad_output, argmax, grad_input, g, argmax_invalid);
}

bool fast_unpool_argmax(const at::Tensor& values, const at::Tensor& argmax, const at::Tensor& out,
                        const Pool2dGeometry& g, std::atomic<bool>* argmax_invalid) {
  return route(&FastPaths::unpool_argmax, values, argmax, out, g, argmax_invalid);
}

namespace {

// With fewer channels (mnist: 10) the gather measured slower than the scatter.
constexpr int64_t kMinTiledUnpoolChannels = 16;

// Unpool by indices along rows gains by its streaming stores, where the
// output leaves the caches anyway: at 8 times the size that streaming starts
// at (64 MiB by default). Below, the scatter, writing through the caches,
// measured faster.
constexpr int64_t kUnpoolRowsStreamMultiple = 8;

// values (undefined: a mask of `pooled`'s shape) keyed by indices or argmax,
// into `out`, with windows of kernel_h x kernel_w.
bool unpool_tiled(const at::Tensor& values, const Layout4d& pooled, const int64_t* indices,
                  const uint8_t* argmax, const at::Tensor& out, int64_t kernel_h,
                  int64_t kernel_w) {
  const Layout4d out_l = layout_of(out);
  // A tensor contiguous in both formats (one channel, or 1x1 planes) reads as
  // NCHW; both then address every element alike. NCHW takes the other paths:
  // its rows of windows are too short for the compiler's vectors.
  if (!(out_l.channels_last || pooled.channels_last) || out_l.c < kMinTiledUnpoolChannels) {
    return false;
  }
  const TiledUnpoolArgs args{values.defined() ? values.element_size() : 1,
                             out_l.n,
                             out_l.c,
                             pooled.h,
                             pooled.w,
                             out_l.h,
                             out_l.w,
                             kernel_h,
                             kernel_w,
                             values.defined() ? values.const_data_ptr() : nullptr,
                             indices,
                             argmax,
                             out.mutable_data_ptr()};
  return cpu_fast_paths().unpool_tiled(args);
}

}  // namespace

bool fast_unpool_indices(const at::Tensor& values, const at::Tensor& indices,
                         const at::Tensor& out) {
  // The windows the indices came from if a pooling with kernel == stride made
  // them; the kernels check that each index lies in its own, so a wrong guess
  // costs time, never a wrong result.
  const Layout4d pooled = layout_of(values);
  const int64_t kernel_h = out.size(2) / pooled.h, kernel_w = out.size(3) / pooled.w;
  if (kernel_h <= 0 || kernel_w <= 0) return false;
  // Route like unpool by argmax, each index's tap found as its row is first
  // routed (a uint8, 255 for none): channels_last pixels of whole vectors of
  // channels at any size, rows of pixels (NCHW, channels_last with 1 or 2
  // channels) where the output is large.
  const Layout4d out_l = layout_of(out);
  if (kernel_h * kernel_w < 255 &&
      ((out_l.channels_last && out_l.c % 8 == 0) ||
       static_cast<int64_t>(out.nbytes()) >= kUnpoolRowsStreamMultiple * stream_min_bytes())) {
    const Pool2dGeometry g{out.size(2), out.size(3), pooled.h, pooled.w, kernel_h, kernel_w,
                           kernel_h,    kernel_w,    0,        0,        1,        1};
    std::atomic<bool> outside{false};
    const auto [from_l, to_l] = shared_layouts(values, out);
    const FastBackwardArgs by_rows{values.scalar_type(), from_l, to_l, values.const_data_ptr(),
                                   nullptr, out.mutable_data_ptr(), g, &outside,
                                   indices.const_data_ptr<int64_t>()};
    if (cpu_fast_paths().unpool_argmax(by_rows)) return !outside;
  }
  return unpool_tiled(values, pooled, indices.const_data_ptr<int64_t>(), nullptr, out, kernel_h,
                      kernel_w);
}

bool fast_unpool_by_argmax(const at::Tensor& values, const at::Tensor& argmax,
                           const at::Tensor& out, const Pool2dGeometry& g) {
  return tiles_input(g) && argmax.scalar_type() == at::kByte &&
         unpool_tiled(values, layout_of(argmax), nullptr, argmax.const_data_ptr<uint8_t>(), out,
                      g.kernel_h, g.kernel_w);
}

}  // namespace poolx
