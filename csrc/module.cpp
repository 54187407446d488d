// The Python module poolx._C: importing it loads the library and runs its
// TORCH_LIBRARY registrations. It also offers a shorter road into the ops for
// eager calls from Python (poolx/_functions.py, _call): torch.ops parses each
// call against the op's schema through pybind11 and builds several Python
// objects on the way, which for a small tensor costs more than the kernel.
// call(op, *args) takes only the argument types the pooling ops use, of their
// exact Python types, and hands them to the same dispatcher (autograd,
// dispatch modes, every backend alike); anything else returns NotImplemented
// and the caller takes torch.ops.
#include <Python.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <vector>

namespace {

std::vector<c10::OperatorHandle>& op_handles() {
  static std::vector<c10::OperatorHandle> handles;
  return handles;
}

// find_op(name) -> the number that call() takes for the op `name` ("poolx::..."),
// one that returns tensors; the same number for the same op.
PyObject* find_op(PyObject*, PyObject* name) {
  HANDLE_TH_ERRORS
  const char* text = PyUnicode_AsUTF8(name);
  if (text == nullptr) return nullptr;
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(text, "");
  for (const auto& result : op.schema().returns()) {
    TORCH_CHECK(result.type()->kind() == c10::TypeKind::TensorType, "find_op: ", text,
                " returns a ", result.type()->str(), "; call() returns only tensors");
  }
  auto& handles = op_handles();
  auto found = std::find(handles.begin(), handles.end(), op);
  if (found == handles.end()) found = handles.insert(handles.end(), op);
  return PyLong_FromSsize_t(found - handles.begin());
  END_HANDLE_TH_ERRORS
}

// An int of Python's exact int type within int64's range.
bool to_int(PyObject* arg, int64_t& out) {
  if (!PyLong_CheckExact(arg)) return false;
  const long long v = PyLong_AsLongLong(arg);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();  // out of range: torch.ops says so
    return false;
  }
  out = static_cast<int64_t>(v);
  return true;
}

// arg as an IValue of the schema's type `type`: a torch.Tensor (not a
// subclass), a bool, an int, or a tuple or list of ints (torch.Size too) for
// an int list; false for anything else.
bool to_ivalue(PyObject* arg, const c10::Type& type, c10::IValue& out) {
  switch (type.kind()) {
    case c10::TypeKind::TensorType:
      if (!THPVariable_CheckExact(arg)) return false;
      out = THPVariable_Unpack(arg);
      return true;
    case c10::TypeKind::BoolType:
      if (!PyBool_Check(arg)) return false;
      out = arg == Py_True;
      return true;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType: {
      int64_t v = 0;
      if (!to_int(arg, v)) return false;
      out = v;
      return true;
    }
    case c10::TypeKind::ListType: {
      const auto element = type.containedType(0)->kind();
      if (!(PyTuple_Check(arg) || PyList_Check(arg)) ||
          (element != c10::TypeKind::IntType && element != c10::TypeKind::SymIntType)) {
        return false;
      }
      PyObject* const* items = PySequence_Fast_ITEMS(arg);
      std::vector<int64_t> ints(PySequence_Fast_GET_SIZE(arg));
      for (size_t i = 0; i < ints.size(); ++i) {
        if (!to_int(items[i], ints[i])) return false;
      }
      out = std::move(ints);
      return true;
    }
    default:
      return false;
  }
}

// call(op, *args): the op's result (a tensor or a tuple of tensors), or
// NotImplemented where an argument is of another type or the count differs.
PyObject* call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs < 1 || !PyLong_CheckExact(args[0])) Py_RETURN_NOTIMPLEMENTED;
  const Py_ssize_t index = PyLong_AsSsize_t(args[0]);
  if (index == -1 && PyErr_Occurred()) PyErr_Clear();  // too large: no such op
  if (index < 0 || index >= static_cast<Py_ssize_t>(op_handles().size())) {
    Py_RETURN_NOTIMPLEMENTED;
  }
  // a copy: find_op may grow the vector while the GIL is released below
  const c10::OperatorHandle op = op_handles()[index];
  const auto& schema = op.schema();
  if (static_cast<size_t>(nargs - 1) != schema.arguments().size()) Py_RETURN_NOTIMPLEMENTED;
  torch::jit::Stack stack;
  stack.reserve(nargs - 1);
  for (Py_ssize_t i = 1; i < nargs; ++i) {
    c10::IValue value;
    if (!to_ivalue(args[i], *schema.arguments()[i - 1].type(), value)) Py_RETURN_NOTIMPLEMENTED;
    stack.push_back(std::move(value));
  }
  {
    pybind11::gil_scoped_release no_gil;  // as torch.ops: other threads run meanwhile
    op.callBoxed(stack);
  }
  if (stack.size() == 1) return THPVariable_Wrap(stack[0].toTensor());
  PyObject* result = PyTuple_New(static_cast<Py_ssize_t>(stack.size()));
  if (result == nullptr) return nullptr;
  for (size_t i = 0; i < stack.size(); ++i) {
    PyObject* item = THPVariable_Wrap(stack[i].toTensor());
    if (item == nullptr) {
      Py_DECREF(result);
      return nullptr;
    }
    PyTuple_SET_ITEM(result, static_cast<Py_ssize_t>(i), item);
  }
  return result;
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"find_op", find_op, METH_O, "find_op(name): the number of op `name` for call()."},
    {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call)), METH_FASTCALL,
     "call(op, *args): the op's result, or NotImplemented for arguments it does not take."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef poolx_module = {PyModuleDef_HEAD_INIT, "_C", "poolx operators", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&poolx_module); }
