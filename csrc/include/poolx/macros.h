// Qualifiers for code compiled by both the host compiler and nvcc.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define POOLX_HD __host__ __device__ __forceinline__
#else
#define POOLX_HD inline
#endif
