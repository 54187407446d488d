// See CUDAGuard.h: the emulation build's c10/cuda.
#pragma once
#include "CUDAGuard.h"
