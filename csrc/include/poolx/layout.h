// Addressing of a contiguous 4-D tensor stored NCHW or channels_last (NHWC).
#pragma once

#include <cstdint>

#include "poolx/elements.h"

namespace poolx {

struct Layout4d {
  int64_t n, c, h, w;
  bool channels_last;

  POOLX_HD int64_t plane_offset(int64_t in, int64_t ic) const {
    return channels_last ? in * h * w * c + ic : (in * c + ic) * h * w;
  }
  POOLX_HD PlaneStrides plane_strides() const {
    return channels_last ? PlaneStrides{w * c, c} : PlaneStrides{w, 1};
  }
  POOLX_HD int64_t numel() const { return n * c * h * w; }

  // offset / size, with the remainder in *rem.
  POOLX_HD static int64_t split(int64_t offset, int64_t size, int64_t* rem) {
    const int64_t q = div_nonneg(offset, size);
    *rem = offset - q * size;
    return q;
  }

  struct Coord {
    int64_t n, c, h, w;
  };
  // Coordinates of the element at `offset` in memory order.
  POOLX_HD Coord coord(int64_t offset) const {
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

}  // namespace poolx
