// Settings structs <-> Python dicts (to_dict, pickling, equality), derived from the field tables.
#pragma once
#include <pybind11/pybind11.h>

#include "svattn/batch_solver.h"
#include "svattn/memory.h"
#include "svattn/settings_fields.h"

namespace svattn::python {

namespace py = pybind11;

py::dict settings_to_dict(const KernelSettings& s);
py::dict settings_to_dict(const ProblemSettings& s);
py::dict settings_to_dict(const Tolerances& s);
py::dict settings_to_dict(const MemorySettings& s);
py::dict settings_to_dict(const BatchSettings& s);

/// One field value as a Python object, and back (a TypeError when `o` has another type).
py::object field_to_py(const FieldValue& v);
FieldValue field_from_py(const FieldSpec& f, const py::handle& o);

/// Inverse of settings_to_dict; raises KeyError naming a missing field.
template <typename T>
T settings_from_dict(const py::dict& d);

}  // namespace svattn::python
