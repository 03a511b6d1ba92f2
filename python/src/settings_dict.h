// Settings structs <-> Python dicts (to_dict, pickling, equality). One place for every field name.
#pragma once
#include <pybind11/pybind11.h>

#include "svattn/batch_solver.h"
#include "svattn/memory.h"

namespace svattn::python {

namespace py = pybind11;

py::dict settings_to_dict(const KernelSettings& s);
py::dict settings_to_dict(const ProblemSettings& s);
py::dict settings_to_dict(const Tolerances& s);
py::dict settings_to_dict(const MemorySettings& s);
py::dict settings_to_dict(const BatchSettings& s);

/// Inverse of settings_to_dict; raises KeyError naming a missing field.
template <typename T>
T settings_from_dict(const py::dict& d);

}  // namespace svattn::python
