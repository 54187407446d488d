// The fast paths built for avx512; setup.py gives this file its ISA flags.
#define POOLX_ISA_NAMESPACE isa_avx512
#define POOLX_ISA_NAME "avx512"
#include "fast_paths_impl.h"
