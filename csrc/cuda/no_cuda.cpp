// Built instead of the CUDA kernels when poolx is compiled without CUDA.
#include <c10/util/Exception.h>

#include "../kernels.h"

namespace poolx {

const Pool2dKernels& cuda_kernels() {
  TORCH_CHECK(false,
              "poolx was built without CUDA kernels, so it cannot run on CUDA tensors. Rebuild "
              "it where PyTorch has CUDA and nvcc is on the PATH (or set FORCE_CUDA=1): "
              "pip install --no-build-isolation --force-reinstall .");
}

}  // namespace poolx
