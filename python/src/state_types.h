// Python bindings of the result structs shared by the memory, the solver and the store: State,
// Partition, KktReport, OpDiagnostics (numpy arrays for id/coefficient vectors).
#pragma once
#include <pybind11/pybind11.h>

#include "svattn/memory.h"

namespace svattn::python {

namespace py = pybind11;

void register_state_types(py::module_& m);
py::dict state_to_dict(const State& s);
py::dict diagnostics_to_dict(const OpDiagnostics& d);
py::dict kkt_to_dict(const KktReport& k);

}  // namespace svattn::python
