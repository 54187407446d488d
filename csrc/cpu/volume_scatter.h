// Volumes whose windows overlap, pad or dilate (tiled ones take the tiled
// rows): unpool by argmax and the mask as a scatter per plane (NCDHW) or per
// image (channels_last_3d), windows in memory order; the backward too where
// the fast paths decline (adaptive windows, windows of 64 taps or more, few
// windows a plane, an int32 argmax). Each input's gradient then adds its
// windows in torch's order, starting from the zeroed plane as torch's does,
// and unpool keeps the last window's value.
// Tensors are the folded 4-D views (geometry.h).
#pragma once

#include <ATen/core/Tensor.h>

#include "poolx/geometry.h"
#include "volume_scatter_kernel.h"

namespace poolx {

// kAdd: `from` (grad_output) summed into `to` (grad_input); kCopy: `from`
// (values) copied into `to`; kMark: true into the bool `to` (`from` undefined).
// False where an argmax value names no tap of its window inside the input
// (nothing is written out of bounds before).
bool scatter_volume(Scatter how, const at::Tensor& from, const at::Tensor& argmax,
                    const at::Tensor& to, const Pool2dGeometry& g);

// int64 indices ((d * in_h + h) * in_w + w) of a forward's own 1-byte argmax,
// unchecked, windows placed as the element functions place them: for
// adaptive windows, which index rows do not cover.
void indices_by_windows(const at::Tensor& argmax, const at::Tensor& indices,
                        const Pool2dGeometry& g);

}  // namespace poolx
