// The CUDA runtime as the emulation build sees it.
#pragma once
#include "launch_model.h"
