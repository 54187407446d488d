// The fast paths built for default; setup.py gives this file its ISA flags.
#define POOLX_ISA_NAMESPACE isa_default
#define POOLX_ISA_NAME "default"
#include "fast_paths_impl.h"
