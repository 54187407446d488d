// POOLX_CPU_CLONES: a function compiled for AVX-512 and AVX2 as well as the
// baseline, the best one picked when the library loads (GCC's target_clones).
// For loops the compiler vectorizes well, without hand-written code per
// instruction set; elsewhere it compiles the baseline alone.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define POOLX_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define POOLX_CPU_CLONES
#endif
