// CPU kernels: the fast paths where they apply, else parallel loops over the
// element functors that the CUDA kernels run too (poolx/element_ops.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>

#include "../kernels.h"
#include "../pool_args.h"
#include "../dispatch.h"
#include "../tensor_layout.h"
#include "argmax_check.h"
#include "fast_paths.h"
#include "index_rows.h"
#include "parallel_elements.h"
#include "scatter.h"
#include "volume_scatter.h"
#include "poolx/element_ops.h"

namespace poolx {
namespace {

using at::Tensor;

bool argmax_to_indices(const Tensor& argmax, const Tensor& indices, const Pool2dGeometry& g,
                       bool check);

void forward(const Tensor& input, const Tensor& values, const Tensor& argmax,
             const Tensor& indices, const Pool2dGeometry& g);

// Pools without indices where a fast path takes it so (true), for indices
// from the argmax after: a volume whose windows are one slice deep and step
// one slice as the planes of its slices (the glue's view for values alone,
// which more paths take), other geometries as they are.
bool pooled_without_indices(const Tensor& input, const Tensor& values, const Tensor& argmax,
                            const Pool2dGeometry& g) {
  const KernelView planes = kernel_view(
      g, input.is_contiguous() ? at::MemoryFormat::Contiguous : at::MemoryFormat::ChannelsLast3d);
  if (!planes.slices_as_planes) return fast_forward(input, values, argmax, Tensor(), g);
  const auto volume = [](const Tensor& t, int64_t d, int64_t h) { return t.unflatten(2, {d, h}); };
  forward(planes(volume(input, g.in_d, g.in_h)), planes(volume(values, g.out_d, g.out_h)),
          planes(volume(argmax, g.out_d, g.out_h)), Tensor(), planes.g);
  return true;
}

void forward(const Tensor& input, const Tensor& values, const Tensor& argmax,
             const Tensor& indices, const Pool2dGeometry& g) {
  if (fast_forward(input, values, argmax, indices, g)) return;
  // Where index rows do not apply (dilated windows that padding shifts,
  // adaptive ones) or the glue handed a volume over whole for its indices
  // (windows one slice deep), a fast forward of a volume or of adaptive
  // windows declines the indices: they come from its argmax after.
  if (indices.defined() && (!g.planar() || g.adaptive()) &&
      pooled_without_indices(input, values, argmax, g)) {
    argmax_to_indices(argmax, indices, g, /*check=*/false);
    return;
  }
  const Layout4d in_l = layout_of(input), out_l = layout_of(values);
  const at::ScalarType am_type = argmax.defined() ? argmax.scalar_type() : at::kByte;
  POOLX_DISPATCH_POOLED_TYPES(input.scalar_type(), "poolx_max_pool2d_cpu", [&] {
    dispatch_argmax_type(am_type, [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      const scalar_t* in = input.const_data_ptr<scalar_t>();
      scalar_t* out = values.mutable_data_ptr<scalar_t>();
      argmax_t* am = argmax.defined() ? argmax.mutable_data_ptr<argmax_t>() : nullptr;
      int64_t* idx = indices.defined() ? indices.mutable_data_ptr<int64_t>() : nullptr;
      parallel_for_each_element(out_l,
                                ForwardElem<scalar_t, argmax_t>{in, out, am, in_l, g, idx});
    });
  });
}

int64_t first_invalid_argmax(const Tensor& argmax, const Pool2dGeometry& g) {
  return poolx::first_invalid_argmax(argmax.const_data_ptr(), argmax.scalar_type() == at::kInt,
                                     layout_of(argmax), g);
}

// See backward.
constexpr int64_t kScatterWindow = 64;

// Whether an NCHW plane (NCDHW volume) has few enough windows that their
// scatter (by runs of planes, isa/scatter_runs.h) beats the paths by rows,
// whose work per row and plane outweighs such a plane's windows: planes of
// up to 64 windows (196 measured faster by rows), volumes of up to 4096,
// bfloat16 ones up to 1024 (3136 measured faster by rows; DESIGN.md has the
// times). float64, which the runs do not serve, scatters by the generic
// table up to 16 windows a plane and 64 a volume.
bool few_windows(const Tensor& grad_input, const Pool2dGeometry& g) {
  const int64_t windows = g.out_d * g.out_h * g.out_w;
  if (layout_of(grad_input).channels_last) return false;
  if (grad_input.scalar_type() == at::kDouble) return windows <= (g.planar() ? 16 : 64);
  if (g.planar()) return windows <= 64;
  return windows <= (grad_input.scalar_type() == at::kBFloat16 ? 1024 : 4096);
}

bool argmax_valid(const Tensor& argmax, const Pool2dGeometry& g) {
  return poolx::argmax_valid(argmax.const_data_ptr(), argmax.scalar_type() == at::kInt,
                             layout_of(argmax), g);
}

bool backward(const Tensor& grad_output, const Tensor& argmax, const Tensor& grad_input,
              const Pool2dGeometry& g) {
  std::atomic<bool> invalid{false};
  // Windows of many taps (global pooling) and adaptive ones scatter: a zeroed
  // input and a write per window move less than a pass over every input.
  // So do planes of few windows, whose rows are too short for the row paths.
  const bool scatters = g.adaptive() || g.window_size() >= kScatterWindow ||
                        few_windows(grad_input, g);
  if (!scatters && fast_backward(grad_output, argmax, grad_input, g, &invalid)) {
    return !invalid;
  }
  if (!g.planar() || scatters) {
    if (fast_scatter_add(grad_output, argmax, grad_input, g, &invalid)) return !invalid;
    return scatter_volume(Scatter::kAdd, grad_output, argmax, grad_input, g);
  }
  if (!argmax_valid(argmax, g)) return false;
  const Layout4d out_l = layout_of(grad_output), in_l = layout_of(grad_input);
  POOLX_DISPATCH_GRAD_TYPES(grad_output.scalar_type(), "poolx_max_pool2d_backward_cpu", [&] {
    dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      const scalar_t* go = grad_output.const_data_ptr<scalar_t>();
      const argmax_t* am = argmax.const_data_ptr<argmax_t>();
      scalar_t* gi = grad_input.mutable_data_ptr<scalar_t>();
      // sums in the element type, as torch's CPU kernels add into the gradient
      parallel_for_each_element(
          in_l, BackwardElem<scalar_t, argmax_t, /*sum_t=*/scalar_t>{go, am, gi, out_l, g});
    });
  });
  return true;
}

// The rows check the argmax as they read it (where `check`): value < taps
// everywhere, and the taps of windows that reach past the input by the rule.
// False where a value is invalid.
bool argmax_to_indices(const Tensor& argmax, const Tensor& indices, const Pool2dGeometry& g,
                       bool check) {
  // (The rule's tables, which check windows that reach past the input, are
  // of planes: volumes take the rows where every window lies inside, or
  // where no check is asked for; adaptive windows, by windows below.)
  if (argmax.scalar_type() == at::kByte && !g.adaptive() &&
      IndexRows::applies(g, layout_of(argmax).channels_last) &&
      (g.planar() || windows_inside(g) || !check)) {
    const Layout4d l = layout_of(argmax);
    const IndexRows rows(argmax.const_data_ptr<uint8_t>(), indices.mutable_data_ptr<int64_t>(),
                         l, g);
    const isa_none::ArgmaxRule rule(g);
    const bool all_whole = !check || !g.planar() || rule.all_whole();
    const int64_t taps = g.window_size(), row_len = l.numel() / rows.rows();
    std::atomic<bool> invalid{false};
    at::parallel_for(0, rows.rows(), std::max<int64_t>(1, at::internal::GRAIN_SIZE / row_len),
                     [&](int64_t begin, int64_t end) {
      uint8_t most = 0;
      bool valid = true;
      const int64_t C = l.channels_last ? l.c : 1;
      for (int64_t r = begin; r < end; ++r) {
        most = std::max(most, rows.convert(r));
        // each row checked after it is converted, from the cache
        if (!all_whole) {
          valid &= rule.windows_valid(argmax.const_data_ptr<uint8_t>() + r * row_len, r % l.h, 0,
                                      l.w, C, /*below_taps=*/true);
        }
      }
      rows.publish();
      if (!valid || most >= taps) invalid.store(true, std::memory_order_relaxed);
    });
    return !invalid;
  }
  if (!check && g.adaptive() && argmax.scalar_type() == at::kByte) {
    indices_by_windows(argmax, indices, g);
    return true;
  }
  if (check && !argmax_valid(argmax, g)) return false;
  dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
    using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
    const argmax_t* am = argmax.const_data_ptr<argmax_t>();
    int64_t* idx = indices.mutable_data_ptr<int64_t>();
    parallel_for_each_element(layout_of(argmax), IndexElem<argmax_t>{am, idx, g});
  });
  return true;
}

bool gather_by_argmax(const Tensor& src, const Tensor& argmax, const Tensor& out,
                      const Pool2dGeometry& g) {
  if (!argmax_valid(argmax, g)) return false;
  const Layout4d src_l = layout_of(src);
  POOLX_DISPATCH_GRAD_TYPES(src.scalar_type(), "poolx_gather_by_argmax_cpu", [&] {
    dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
      using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
      const scalar_t* s = src.const_data_ptr<scalar_t>();
      const argmax_t* am = argmax.const_data_ptr<argmax_t>();
      scalar_t* o_ptr = out.mutable_data_ptr<scalar_t>();
      parallel_for_each_element(layout_of(out),
                                GatherElem<scalar_t, argmax_t>{s, am, o_ptr, src_l, g});
    });
  });
  return true;
}

// The tiled gather (unpool_tiled.h) checks that every tap lies in its window,
// which is the whole check where windows tile the input; the scatter checks
// each run of argmax before it looks taps up.
bool argmax_to_mask(const Tensor& argmax, const Tensor& mask, const Pool2dGeometry& g) {
  TORCH_INTERNAL_ASSERT(!g.adaptive(), "argmax_to_mask serves no adaptive pooling");
  if (!g.planar()) return scatter_volume(Scatter::kMark, Tensor(), argmax, mask, g);
  return fast_unpool_by_argmax(Tensor(), argmax, mask, g) ||
         scatter_by_argmax_cpu(Tensor(), argmax, mask, g);
}

bool max_unpool2d_argmax(const Tensor& values, const Tensor& argmax, const Tensor& out,
                         const Pool2dGeometry& g) {
  TORCH_INTERNAL_ASSERT(!g.adaptive(), "max_unpool2d_argmax serves no adaptive pooling");
  std::atomic<bool> invalid{false};
  if (fast_unpool_argmax(values, argmax, out, g, &invalid)) return !invalid;
  if (!g.planar()) return scatter_volume(Scatter::kCopy, values, argmax, out, g);
  return fast_unpool_by_argmax(values, argmax, out, g) ||
         scatter_by_argmax_cpu(values, argmax, out, g);
}

void max_unpool2d_indices(const Tensor& values, const Tensor& indices, const Tensor& out) {
  if (!fast_unpool_indices(values, indices, out)) max_unpool2d_indices_cpu(values, indices, out);
}

}  // namespace

const Pool2dKernels& cpu_kernels() {
  static const Pool2dKernels kernels{forward,          backward,       argmax_to_indices,
                                     gather_by_argmax, argmax_to_mask, max_unpool2d_argmax,
                                     max_unpool2d_indices, first_invalid_argmax};
  return kernels;
}

}  // namespace poolx
