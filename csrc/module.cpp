// An empty Python module, so that `import poolx._C` loads the library and
// runs its TORCH_LIBRARY registrations.
#include <Python.h>

static PyModuleDef poolx_module = {PyModuleDef_HEAD_INIT, "_C", "poolx operators", -1, nullptr};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&poolx_module); }
