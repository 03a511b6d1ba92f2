// The svattn._core extension module (docs/python.md): the exact memory, the batch solver, the
// verifier and the store, numpy in and out. The pure-Python package `svattn` re-exports it.
#include "module.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "svattn core: the exact support-vector attention memory (C++ library bindings).";
  svattn::python::register_errors(m);
  svattn::python::register_settings(m);
  svattn::python::register_memory(m);
  svattn::python::register_solve(m);
  svattn::python::register_certificate(m);
#ifdef SVATTN_PYTHON_WITH_STORE
  svattn::python::register_store(m);
#endif
}
