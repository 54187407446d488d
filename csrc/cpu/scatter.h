// The CPU ops that place pooled elements into input-shaped planes: unpool by
// int64 indices, unpool by argmax, and the mask of the maxima. One scatter per
// plane with the zero-fill folded in, deterministic on any number of threads:
// within a plane the pooled element that comes last in row-major order wins.
#pragma once

#include <ATen/core/Tensor.h>

#include "poolx/geometry.h"

namespace poolx {

// values placed at their flat indices; an index outside the plane raises
// torch's error.
void max_unpool2d_indices_cpu(const at::Tensor& values, const at::Tensor& indices,
                              const at::Tensor& out);

// values (undefined: the value true, for a bool mask) placed at each window's
// selected tap; a window with no tap inside the input places nothing. False
// (the output garbage, never written out of bounds) where a value names no
// tap of its window inside the input.
bool scatter_by_argmax_cpu(const at::Tensor& values, const at::Tensor& argmax,
                           const at::Tensor& out, const Pool2dGeometry& g);

}  // namespace poolx
