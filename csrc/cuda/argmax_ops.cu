// CUDA kernels of the ops built on the argmax (indices, mask, double
// backward) and of unpool by indices: one thread per element, each calling the
// shared element function that the CPU kernels call; the mask and unpool take
// the tiled routing (tiled_route.cuh) where windows tile the input, and the
// mask is scattered per window elsewhere (argmax_scatter.cuh).
#include <c10/macros/Macros.h>

#include <type_traits>

#include "argmax_scatter.cuh"
#include "channels_last.cuh"
#include "cuda_common.cuh"
#include "launchers.h"
#include "plane_scatter.cuh"
#include "poolx/element_ops.h"
#include "tiled_route.cuh"

namespace poolx {
namespace cuda_launch {
namespace {

// Unpool by int64 indices, deterministically: torch's CPU kernel lets the
// last input (in row-major order within a plane) win a target. Pass 1 keeps,
// per target, 1 + the largest in-plane offset of an input that writes it
// (atomicMax is order-independent; in-plane offsets grow with row-major
// position in both layouts); pass 2 reads that input, or writes 0. A key is
// as wide as the kernel's index type: half the scratch traffic in 32 bits.
template <typename I>  // types of CUDA's atomicMax overloads
using Key = std::conditional_t<sizeof(I) == 4, unsigned, unsigned long long>;

template <typename I>
__device__ Key<I>* keys(void* scratch) {
  return static_cast<Key<I>*>(scratch);
}
template <typename I>
__device__ const Key<I>* keys(const void* scratch) {
  return static_cast<const Key<I>*>(scratch);
}

inline int64_t key_bytes(IndexWidth width) {
  return width == IndexWidth::k32 ? sizeof(Key<int32_t>) : sizeof(Key<int64_t>);
}

struct UnpoolClaimElem {
  const int64_t* indices;
  void* scratch;
  Layout4d values_l, out_l;

  template <typename I>
  __device__ void operator()(I n, I c, I ih, I iw, I i) const {
    if (!valid_unpool_index(indices[i], out_l.h * out_l.w)) return;
    const auto ol = out_l.as<I>(), vl = values_l.as<I>();
    const PlaneStridesT<I> os = ol.plane_strides(), vs = vl.plane_strides();
    const I target = static_cast<I>(indices[i]);
    const I th = div_nonneg(target, ol.w);
    const I o = ol.plane_offset(n, c) + th * os.h + (target - th * ol.w) * os.w;
    atomicMax(keys<I>(scratch) + o, static_cast<Key<I>>(ih * vs.h + iw * vs.w + 1));
  }
};

template <typename scalar_t>
struct UnpoolGatherElem {
  const scalar_t* values;
  const void* scratch;
  scalar_t* out;
  Layout4d values_l;

  template <typename I>
  __device__ void operator()(I n, I c, I, I, I o) const {
    const Key<I> key = keys<I>(scratch)[o];
    out[o] = key == 0 ? scalar_t(0)
                      : values[values_l.as<I>().plane_offset(n, c) + static_cast<I>(key - 1)];
  }
};

struct ClearKey {
  void* scratch;

  template <typename I>
  __device__ void operator()(I, I, I, I, I i) const {
    keys<I>(scratch)[i] = 0;
  }
};

template <typename argmax_t>
struct CheckArgmaxElem {
  const argmax_t* argmax;
  Pool2dGeometry g;

  template <typename I>
  __device__ void operator()(I, I, I oh, I ow, I o) const {
    POOLX_ASSERT_ARGMAX(argmax_is_valid(static_cast<I>(argmax[o]), g.as<I>(), oh, ow));
  }
};

}  // namespace

int64_t max_unpool2d_indices_scratch_bytes(const Layout4d& values_l, const Layout4d& out_l) {
  const IndexWidth width = index_width(values_l, out_l);
  if (plane_scatter_fits(values_l, out_l, width)) return 0;
  return out_l.numel() * key_bytes(width) + sizeof(unsigned);
}

template <typename argmax_t>
cudaError_t check_argmax(const argmax_t* argmax, const Layout4d& argmax_l, const Pool2dGeometry& g,
                         cudaStream_t stream) {
  return launch_for_each_element(argmax_l, CheckArgmaxElem<argmax_t>{argmax, g},
                                 index_width(argmax_l, argmax_l, g), stream);
}

template <typename argmax_t>
cudaError_t argmax_to_indices(const argmax_t* argmax, int64_t* indices, const Layout4d& out_l,
                              const Pool2dGeometry& g, cudaStream_t stream) {
  return launch_for_each_element(out_l, IndexElem<argmax_t>{argmax, indices, g},
                                 index_width(out_l, out_l, g), stream);
}

template <typename scalar_t, typename argmax_t>
cudaError_t gather_by_argmax(const scalar_t* src, const argmax_t* argmax, scalar_t* out,
                             const Layout4d& src_l, const Layout4d& out_l,
                             const Pool2dGeometry& g, cudaStream_t stream) {
  return launch_for_each_element(
      out_l, GatherElem<scalar_t, argmax_t>{src, argmax, out, src_l, g},
      index_width(src_l, out_l, g), stream);
}

// The mask: true routed to each window's selected tap where windows tile the
// input (the argmax checked as it is read), else scattered (argmax_scatter.cuh):
// a zero fill and 1-byte writes of the selected taps, which measured faster
// than the plane scatter's write of every output.
template <typename argmax_t>
cudaError_t argmax_to_mask(const argmax_t* argmax, bool* mask, const Layout4d& argmax_l,
                           const Layout4d& mask_l, const Pool2dGeometry& g,
                           cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  if constexpr (std::is_same<argmax_t, uint8_t>::value) {
    if (try_tiled_route<Route::kOne>(static_cast<const uint8_t*>(nullptr), ArgmaxTaps{argmax},
                                     reinterpret_cast<uint8_t*>(mask), argmax_l, mask_l, g, stream,
                                     &err)) {
      return err;
    }
  }
  err = cudaMemsetAsync(mask, 0, mask_l.numel() * sizeof(bool), stream);
  if (err != cudaSuccess) return err;
  return launch_for_each_element(argmax_l, MaskScatterElem<argmax_t>{argmax, mask, mask_l, g},
                                 index_width(argmax_l, mask_l, g), stream);
}

// Unpool by indices: NCHW planes that fit a block's shared memory take the
// plane scatter (no scratch). Elsewhere, where windows tile the output
// (kernel == stride, guessed as output size // input size, as torch's
// max_unpool2d has no kernel size): the tiled routing with each index's tap,
// one pass. If an index lies outside
// its window (other pooling arguments, repeated or bad indices), the routing
// sets a flag on the device and the general unpool, which runs only then,
// rewrites the whole output: no host sync decides between them.
template <typename scalar_t>
cudaError_t max_unpool2d_indices(const scalar_t* values, const int64_t* indices, scalar_t* out,
                                 void* scratch, const Layout4d& values_l,
                                 const Layout4d& out_l, cudaStream_t stream) {
  const IndexWidth width = index_width(values_l, out_l);
  cudaError_t err = cudaSuccess;
  using B = Bits<scalar_t>;
  const auto* from = reinterpret_cast<const B*>(values);
  auto* to = reinterpret_cast<B*>(out);
  if (try_plane_scatter(IndexClaims{indices}, from, to, values_l, out_l, width, stream, &err)) {
    return err;
  }
  const int64_t keys_size = out_l.numel() * key_bytes(width);
  // after the keys, which leave it 4-byte aligned
  auto* outside = reinterpret_cast<unsigned*>(static_cast<char*>(scratch) + keys_size);
  const unsigned* gate = nullptr;  // the general unpool runs if null or *gate
  if (values_l.h > 0 && values_l.w > 0 && out_l.h >= values_l.h && out_l.w >= values_l.w) {
    const int64_t kh = out_l.h / values_l.h, kw = out_l.w / values_l.w;
    const Pool2dGeometry g{out_l.h, out_l.w, values_l.h, values_l.w, kh, kw, kh, kw, 0, 0, 1, 1};
    const IndexTaps taps{indices, outside};
    if (tiled_route_lanes(from, taps, to, values_l, out_l, g) != 0) {
      err = cudaMemsetAsync(outside, 0, sizeof(unsigned), stream);
      if (err == cudaSuccess) {
        try_tiled_route<Route::kCopy>(from, taps, to, values_l, out_l, g, stream, &err);
      }
      if (err != cudaSuccess) return err;
      gate = outside;
    }
  }
  const Layout4d key_l{1, 1, 1, out_l.numel(), false};
  err = gate == nullptr
            ? cudaMemsetAsync(scratch, 0, keys_size, stream)
            : launch_for_each_element(key_l, ClearKey{scratch}, width, stream, gate);
  if (err == cudaSuccess) {
    err = launch_for_each_element(values_l, UnpoolClaimElem{indices, scratch, values_l, out_l},
                                  width, stream, gate);
  }
  if (err != cudaSuccess) return err;
  return launch_for_each_element(
      out_l, UnpoolGatherElem<scalar_t>{values, scratch, out, values_l}, width, stream, gate);
}

template cudaError_t check_argmax<uint8_t>(const uint8_t*, const Layout4d&, const Pool2dGeometry&,
                                           cudaStream_t);
template cudaError_t check_argmax<int32_t>(const int32_t*, const Layout4d&, const Pool2dGeometry&,
                                           cudaStream_t);
template cudaError_t argmax_to_indices<uint8_t>(const uint8_t*, int64_t*, const Layout4d&,
                                                const Pool2dGeometry&, cudaStream_t);
template cudaError_t argmax_to_indices<int32_t>(const int32_t*, int64_t*, const Layout4d&,
                                                const Pool2dGeometry&, cudaStream_t);
template cudaError_t argmax_to_mask<uint8_t>(const uint8_t*, bool*, const Layout4d&,
                                             const Layout4d&, const Pool2dGeometry&,
                                             cudaStream_t);
template cudaError_t argmax_to_mask<int32_t>(const int32_t*, bool*, const Layout4d&,
                                             const Layout4d&, const Pool2dGeometry&,
                                             cudaStream_t);

#define POOLX_INSTANTIATE_GATHER(T)                                                           \
  template cudaError_t gather_by_argmax<T, uint8_t>(const T*, const uint8_t*, T*,             \
                                                    const Layout4d&, const Layout4d&,         \
                                                    const Pool2dGeometry&, cudaStream_t);     \
  template cudaError_t gather_by_argmax<T, int32_t>(const T*, const int32_t*, T*,             \
                                                    const Layout4d&, const Layout4d&,         \
                                                    const Pool2dGeometry&, cudaStream_t);
POOLX_CUDA_GRAD_TYPES(POOLX_INSTANTIATE_GATHER)

#define POOLX_INSTANTIATE_UNPOOL(T)                                                           \
  template cudaError_t max_unpool2d_indices<T>(const T*, const int64_t*, T*, void*,           \
                                               const Layout4d&, const Layout4d&, cudaStream_t);
POOLX_CUDA_POOLED_TYPES(POOLX_INSTANTIATE_UNPOOL)

}  // namespace cuda_launch
}  // namespace poolx
