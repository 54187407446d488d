#include "volume_scatter.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <type_traits>

#include "../dispatch.h"
#include "../tensor_layout.h"
#include "volume_scatter_kernel.h"

namespace poolx {

using isa_none::AxisWindows;
using isa_none::TapTable;

void indices_by_windows(const at::Tensor& argmax, const at::Tensor& indices,
                        const Pool2dGeometry& g) {
  const AxisWindows ds(g.axis_d()), hs(g.axis_h()), ws(g.axis_w());
  const TapTable taps(g);
  const Layout4d l = layout_of(argmax);  // rows: out_d * out_h
  const uint8_t* const am = argmax.const_data_ptr<uint8_t>();
  int64_t* const idx = indices.mutable_data_ptr<int64_t>();
  // a row of windows of one plane (NCHW) or of C channels (channels_last)
  const int64_t C = l.channels_last ? l.c : 1, rows = l.numel() / (l.w * C);
  at::parallel_for(0, rows, std::max<int64_t>(1, 4096 / (l.w * C)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t row = r % l.h, od = row / g.out_h, oh = row % g.out_h;
      const int64_t row_first = (ds.start[od] * g.in_h + hs.start[oh]) * g.in_w;
      for (int64_t ow = 0, o = r * l.w * C; ow < l.w; ++ow) {
        const int64_t first = row_first + ws.start[ow];
        for (int64_t c = 0; c < C; ++c, ++o) idx[o] = first + taps.offset[am[o]];
      }
    }
  });
}

bool scatter_volume(Scatter how, const at::Tensor& from, const at::Tensor& argmax,
                    const at::Tensor& to, const Pool2dGeometry& g) {
  const Layout4d out_l = layout_of(argmax);
  // a tensor contiguous in both formats reads as NCHW: the other's decides
  const bool cl = out_l.channels_last || layout_of(to).channels_last ||
                  (from.defined() && layout_of(from).channels_last);
  bool ok = true;
  const auto run = [&](auto how_tag, const auto* src, auto* dst, const auto* am) {
    constexpr Scatter kHow = decltype(how_tag)::value;
    ok = cl ? isa_none::scatter_windows<kHow, false>(src, am, dst, out_l, g)
            : isa_none::scatter_windows<kHow, true>(src, am, dst, out_l, g);
  };
  dispatch_argmax_type(argmax.scalar_type(), [&](auto* am_tag) {
    using argmax_t = std::remove_pointer_t<decltype(am_tag)>;
    const argmax_t* am = argmax.const_data_ptr<argmax_t>();
    if (how == Scatter::kMark) {
      run(std::integral_constant<Scatter, Scatter::kMark>{}, static_cast<const bool*>(nullptr),
          to.mutable_data_ptr<bool>(), am);
      return;
    }
    POOLX_DISPATCH_POOLED_TYPES(to.scalar_type(), "poolx_scatter_volume_cpu", [&] {
      const scalar_t* src = from.const_data_ptr<scalar_t>();
      scalar_t* dst = to.mutable_data_ptr<scalar_t>();
      how == Scatter::kAdd ? run(std::integral_constant<Scatter, Scatter::kAdd>{}, src, dst, am)
                           : run(std::integral_constant<Scatter, Scatter::kCopy>{}, src, dst, am);
    });
  });
  return ok;
}

}  // namespace poolx
