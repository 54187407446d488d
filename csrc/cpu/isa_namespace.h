// The namespace of code that the fast paths compile with each ISA's flags
// (csrc/cpu/isa/fast_paths_<isa>.cpp define it), so that the linker never
// picks one ISA's copy of an inline function for all; isa_none elsewhere.
#pragma once

#ifndef POOLX_ISA_NAMESPACE
#define POOLX_ISA_NAMESPACE isa_none
#endif
