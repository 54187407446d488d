// The fast paths built for avx2; setup.py gives this file its ISA flags.
#define POOLX_ISA_NAMESPACE isa_avx2
#define POOLX_ISA_NAME "avx2"
#include "fast_paths_impl.h"
