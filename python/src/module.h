// Registration functions of the svattn._core extension module, one per binding file.
#pragma once
#include <pybind11/pybind11.h>

namespace svattn::python {

namespace py = pybind11;

void register_errors(py::module_& m);       // errors.cpp
void register_settings(py::module_& m);     // bind_settings.cpp
void register_memory(py::module_& m);       // bind_memory.cpp
void register_solve(py::module_& m);        // bind_solve.cpp
void register_certificate(py::module_& m);  // bind_certificate.cpp
void register_store(py::module_& m);        // bind_store.cpp

}  // namespace svattn::python
