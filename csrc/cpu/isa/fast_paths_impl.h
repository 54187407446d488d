// The fast paths of one instruction set: included once per ISA by
// csrc/cpu/isa/fast_paths_<isa>.cpp, each compiled with that ISA's flags and
// its own POOLX_ISA_NAMESPACE, so that the builds never share a symbol.
#pragma once

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "backward_gather.h"
#include "backward_kernels.h"
#include "backward_routes.h"
#include "backward_scatter.h"
#include "forward_by_pixels.h"
#include "forward_by_windows.h"
#include "forward_kernels.h"
#include "forward_nchw.h"
#include "forward_row_windows.h"
#include "scatter_runs.h"
#include "tiled_rows.h"
#include "tiled_rows_backward.h"
#include "unpool_tiled.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// f(T*) for the element types with fast paths; false for the others.
template <typename F>
bool dispatch_fast_types(c10::ScalarType dtype, F&& f) {
  switch (dtype) {
    case c10::ScalarType::Float: f(static_cast<float*>(nullptr)); return true;
    case c10::ScalarType::BFloat16: f(static_cast<c10::BFloat16*>(nullptr)); return true;
    case c10::ScalarType::Half: f(static_cast<c10::Half*>(nullptr)); return true;
    default: return false;
  }
}

// The layouts that tiled_rows.h covers: NCHW planes, or channels_last images
// of 1 or 2 channels; 0 for others.
inline int tiled_row_channels(const Pool2dGeometry& g, const Layout4d& l) {
  if (!tiles_rows_w2(g)) return 0;
  if (!l.channels_last) return 1;
  return l.c == 1 || l.c == 2 ? static_cast<int>(l.c) : 0;
}

// NCHW windows of width 4 tiling the rows: 1-D pooling by 4, whose long
// rows forward_by_pixels reads (and the scatter writes) a stride of 4 apart;
// the default build's generic deinterleave is no faster than that.
inline bool tiles_quads(const Pool2dGeometry& g, const Layout4d& l) {
  return kVectorBuild && !l.channels_last && tiles_volume(g) && g.kernel_w == 4;
}

inline int64_t tiled_row_planes(const Layout4d& l) {
  return l.channels_last ? l.n : l.n * l.c;
}

inline bool forward(const FastForwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const bool cl = a.in_l.channels_last;
  const int row_c = tiled_row_channels(g, a.in_l);
  const bool quads = tiles_quads(g, a.in_l);
  // volumes: the tiled rows, channels_last along C, and NCDHW rows of stride 1 or 2
  const bool nchw_rows = (g.stride_w == 1 || g.stride_w == 2) && g.dilation_w == 1;
  // NCHW windows that few outputs of a row share: wide ones (global pooling)
  // and adaptive ones, reduced along their own rows
  if (!cl && a.dtype != c10::ScalarType::Double && g.dilation_w == 1 &&
      (g.adaptive() || (row_c == 0 && !quads && !nchw_rows && g.window_size() >= kWideWindow))) {
    return dispatch_fast_types(a.dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      a.argmax ? forward_by_windows<T, true>(a) : forward_by_windows<T, false>(a);
    });
  }
  // other adaptive windows: channels_last alone places them (the others step)
  if (g.adaptive() && (!cl || a.dtype == c10::ScalarType::Double)) return false;
  if (!g.planar() &&
      (a.dtype == c10::ScalarType::Double || (row_c == 0 && !quads && !cl && !nchw_rows))) {
    return false;
  }
  // float64, and NCHW rows that forward_nchw does not cover (stride_w over
  // 2, dilation_w): the element kernels divide per output and, in
  // channels_last, read each output's taps a stride of C apart
  if (a.dtype == c10::ScalarType::Double) {
    forward_by_pixels<double>(a);
    return true;
  }
  if (!cl && row_c == 0 && !quads && !nchw_rows) {
    return dispatch_fast_types(a.dtype, [&](auto* tag) {
      forward_by_pixels<std::remove_pointer_t<decltype(tag)>>(a);
    });
  }
  const int64_t planes = tiled_row_planes(a.in_l);
  return dispatch_fast_types(a.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (quads) {
      a.argmax ? forward_tiled_rows<T, true, 1, 4>(a, planes)
               : forward_tiled_rows<T, false, 1, 4>(a, planes);
    } else if (row_c == 1) {
      a.argmax ? forward_tiled_rows<T, true, 1>(a, planes)
               : forward_tiled_rows<T, false, 1>(a, planes);
    } else if (row_c == 2) {
      a.argmax ? forward_tiled_rows<T, true, 2>(a, planes)
               : forward_tiled_rows<T, false, 2>(a, planes);
    } else if (cl && a.argmax != nullptr && pools_row_windows(g, a.in_l.c)) {
      forward_row_windows<T>(a);
    } else if (cl) {
      a.argmax ? forward_channels_last<T, true>(a) : forward_channels_last<T, false>(a);
    } else {
      a.argmax ? forward_nchw<T, true>(a) : forward_nchw<T, false>(a);
    }
  });
}

inline bool backward(const FastBackwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const bool cl = a.in_l.channels_last;
  const int row_c = tiled_row_channels(g, a.in_l);
  // volumes: the tiled rows, tiled channels_last pixels of whole vectors,
  // the channels_last gather where it pays, else the plane scatter
  const bool tiled_pixels = cl && tiles_volume(g) && a.in_l.c % kLanes == 0;
  const bool gathers = cl && gathers_volume(g, a.in_l.c);
  // float64 (gradcheck's type) has no vector paths; its scatter, summing in
  // double, still beats the element kernels' gather by far
  if (a.dtype == c10::ScalarType::Double) {
    backward_scatter<double>(a);
    return true;
  }
  const int64_t planes = tiled_row_planes(a.in_l);
  return dispatch_fast_types(a.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (tiles_quads(g, a.in_l)) {
      backward_tiled_rows<T, 1, 4, false>(a, planes);
    } else if (row_c == 1) {
      backward_tiled_rows<T, 1, 2, false>(a, planes);
    } else if (row_c == 2) {
      backward_tiled_rows<T, 2, 2, false>(a, planes);
    } else if (!g.planar()) {
      if (tiled_pixels) backward_channels_last_tiled<T>(a);
      else if (gathers) backward_channels_last<T>(a);
      else backward_scatter<T>(a);
    } else if (!cl || (!tiles_input(g) && a.in_l.c < kGatherMinChannels) ||
               scatters_few_channels<T>(a.in_l.c, g.kernel_h * g.kernel_w) ||
               scatters_small_images(g)) {
      backward_scatter<T>(a);
    } else if (tiles_input(g)) {
      backward_channels_last_tiled<T>(a);
    } else {
      backward_channels_last<T>(a);
    }
  });
}

// Unpool by argmax in channels_last where windows overlap, pad or dilate: the
// backward gather with the last selecting window's value copied, for types
// whose float lanes carry the bits unchanged: float32, and bfloat16 on
// AVX-512, where it widens and narrows by shifts (on AVX2 it measured no
// faster than the scatter; float16 converts, quieting a signaling NaN).
inline bool unpool_argmax_gather(const FastBackwardArgs& a) {
  if (a.indices != nullptr || !a.in_l.channels_last || a.in_l.c < kGatherMinChannels) {
    return false;
  }
  if (a.dtype == c10::ScalarType::Float) {
    backward_channels_last<float, /*kCopy=*/true>(a);
    return true;
  }
#if defined(CPU_CAPABILITY_AVX512)
  if (a.dtype == c10::ScalarType::BFloat16) {
    backward_channels_last<c10::BFloat16, /*kCopy=*/true>(a);
    return true;
  }
#endif
  return false;
}

// Unpool by argmax by the backward's scatter, each value's bits stored, not
// added: NCHW planes (where windows overlap, pad or dilate), or channels_last
// images (of few channels, scatters_few_channels).
inline bool unpool_argmax_scatter(const FastBackwardArgs& a) {
  if (a.indices != nullptr) return false;
  const auto scatter = [&](auto* tag) {
    using B = std::remove_pointer_t<decltype(tag)>;
    a.in_l.channels_last ? backward_scatter<B, true, /*kCopy=*/true>(a)
                         : backward_scatter<B, false, /*kCopy=*/true>(a);
    return true;
  };
  switch (c10::elementSize(a.dtype)) {
    case 2: return scatter(static_cast<uint16_t*>(nullptr));
    case 4: return scatter(static_cast<uint32_t*>(nullptr));
    case 8: return scatter(static_cast<uint64_t*>(nullptr));
    default: return false;
  }
}

// channels_last images of few channels (scatters_few_channels) that the
// scatter unpools faster than routing each pixel by vectors; on AVX2 not
// 16-bit ones, where the generic scatter measured faster still.
inline bool unpools_by_scatter(const FastBackwardArgs& a) {
#if defined(CPU_CAPABILITY_AVX2)
  if (a.dtype != c10::ScalarType::Float) return false;
#endif
  bool few = false;
  dispatch_fast_types(a.dtype, [&](auto* tag) {
    few = scatters_few_channels<std::remove_pointer_t<decltype(tag)>>(
        a.in_l.c, a.g.kernel_h * a.g.kernel_w);
  });
  return few;
}

// Unpool by argmax, tiled: each input lies in at most one window, so the
// tiled backward's routing with the value copied is the whole unpool, for
// types whose lanes carry the value's bits unchanged: float32, bfloat16 (on
// AVX2 in float lanes, widened and narrowed by shifts), and float16 in 16-bit
// lanes (AVX-512). Other cases take unpool_tiled.h. By indices, each routed
// row's taps come from its indices (row_taps.h).
inline bool unpool_argmax(const FastBackwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const bool cl = a.in_l.channels_last;
  const int row_c = tiled_row_channels(g, a.in_l);
  // volumes: by argmax, the tiled rows and tiled channels_last pixels of
  // whole vectors
  if (!g.planar() && (a.indices != nullptr || (row_c == 0 && !tiles_quads(g, a.in_l) &&
                                               !(cl && a.in_l.c % kLanes == 0)))) {
    return false;
  }
  if (!tiles_volume(g)) return unpool_argmax_gather(a) || (!cl && unpool_argmax_scatter(a));
  if (cl && row_c == 0 && a.indices == nullptr && unpools_by_scatter(a)) {
    return unpool_argmax_scatter(a);
  }
  // By indices along C, the taps come from whole vectors of 8 indices of one
  // pixel (row_taps.h), on AVX-512; one at a time the gather of
  // unpool_tiled.h measured faster.
#if defined(CPU_CAPABILITY_AVX512)
  if (a.indices != nullptr && row_c == 0 && a.in_l.c % 8 != 0) return false;
#else
  if (a.indices != nullptr && row_c == 0) return false;
#endif
  const int64_t planes = tiled_row_planes(a.in_l);
  const auto rows = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    row_c == 1 ? backward_tiled_rows<T, 1, 2, /*kCopy=*/true>(a, planes)
               : backward_tiled_rows<T, 2, 2, /*kCopy=*/true>(a, planes);
    return true;
  };
  // pixel quads in float lanes: float32, and bfloat16, whose widening and
  // narrowing keep the bits (not float16's, which quiets a signaling NaN)
  if (tiles_quads(g, a.in_l) && (a.dtype == c10::ScalarType::Float ||
                                 a.dtype == c10::ScalarType::BFloat16)) {
    return dispatch_fast_types(a.dtype, [&](auto* tag) {
      backward_tiled_rows<std::remove_pointer_t<decltype(tag)>, 1, 4, /*kCopy=*/true>(a, planes);
    });
  }
  if (a.dtype == c10::ScalarType::Float) {
    if (row_c != 0) return rows(static_cast<float*>(nullptr));
    if (!a.in_l.channels_last) return false;
    backward_channels_last_tiled<float, /*kCopy=*/true>(a);
    return true;
  }
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
  const auto routed = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (row_c != 0) return rows(tag);
    if (!a.in_l.channels_last) return false;
    backward_channels_last_tiled<T, /*kCopy=*/true>(a);
    return true;
  };
  if (a.dtype == c10::ScalarType::BFloat16) return routed(static_cast<c10::BFloat16*>(nullptr));
#endif
#if defined(CPU_CAPABILITY_AVX512)
  if (a.dtype == c10::ScalarType::Half) return routed(static_cast<c10::Half*>(nullptr));
#endif
  return false;
}

inline bool scatter_add(const FastBackwardArgs& a) {
  return dispatch_fast_types(a.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (gathers_adaptive<T>(a.g, a.in_l)) backward_channels_last<T>(a);
    else scatter_windows_add(a, tag);
  });
}

const FastPaths& fast_paths() {
  static const FastPaths paths{POOLX_ISA_NAME, forward,      backward,
                               unpool_argmax,  unpool_tiled, scatter_add};
  return paths;
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
