// Addressing of a contiguous 4-D tensor stored NCHW or channels_last (NHWC).
#pragma once

#include <cstdint>

#include "poolx/elements.h"

namespace poolx {

// I: the index type (geometry.h).
template <typename I>
struct Layout4dT {
  I n, c, h, w;
  bool channels_last;

  template <typename J>
  POOLX_HD Layout4dT<J> as() const {
    return {static_cast<J>(n), static_cast<J>(c), static_cast<J>(h), static_cast<J>(w),
            channels_last};
  }
  POOLX_HD I plane_offset(I in, I ic) const {
    return channels_last ? in * h * w * c + ic : (in * c + ic) * h * w;
  }
  POOLX_HD PlaneStridesT<I> plane_strides() const {
    return channels_last ? PlaneStridesT<I>{w * c, c} : PlaneStridesT<I>{w, 1};
  }
  POOLX_HD I numel() const { return n * c * h * w; }

  // offset / size, with the remainder in *rem.
  POOLX_HD static I split(I offset, I size, I* rem) {
    const I q = div_nonneg(offset, size);
    *rem = offset - q * size;
    return q;
  }

  struct Coord {
    I n, c, h, w;
  };
  // Coordinates of the element at `offset` in memory order.
  POOLX_HD Coord coord(I offset) const {
    Coord p;
    if (channels_last) {
      offset = split(offset, c, &p.c);
      offset = split(offset, w, &p.w);
      p.n = split(offset, h, &p.h);
    } else {
      offset = split(offset, w, &p.w);
      offset = split(offset, h, &p.h);
      p.n = split(offset, c, &p.c);
    }
    return p;
  }
};
using Layout4d = Layout4dT<int64_t>;

}  // namespace poolx
