// State, Partition, KktReport and OpDiagnostics as read-only Python objects with to_dict().
#include "state_types.h"

#include <pybind11/stl.h>

#include "arrays.h"
#include "settings_dict.h"

namespace svattn::python {

namespace {
py::dict partition_to_dict(const Partition& p) {
  py::dict d;
  d["margin"] = to_numpy(p.margin);
  d["error"] = to_numpy(p.error);
  d["reserve"] = to_numpy(p.reserve);
  return d;
}

}  // namespace

py::dict kkt_to_dict(const KktReport& k) {
  py::dict d;
  d["max_violation"] = k.max_violation;
  d["sum_error"] = k.sum_error;
  d["box_violation"] = k.box_violation;
  return d;
}
py::dict state_to_dict(const State& s) {
  py::dict d;
  d["settings"] = settings_to_dict(s.settings);
  d["dim"] = s.dim;
  d["value_dim"] = s.value_dim;
  d["ids"] = to_numpy(s.ids);
  d["alpha"] = to_numpy(s.alpha);
  d["b"] = s.b;
  d["partition"] = partition_to_dict(s.partition);
  d["kkt"] = kkt_to_dict(s.kkt);
  d["status"] = to_string(s.status);
  d["warmup"] = s.warmup;
  d["state_sha256"] = s.state_sha256;
  return d;
}

py::dict diagnostics_to_dict(const OpDiagnostics& o) {
  py::dict d;
  d["ops"] = o.ops;
  d["events"] = o.events;
  d["zero_steps"] = o.zero_steps;
  d["refused_entrants"] = o.refused_entrants;
  d["refactorizations"] = o.refactorizations;
  d["canonical_solves"] = o.canonical_solves;
  d["repairs"] = o.repairs;
  d["batch_fallbacks"] = o.batch_fallbacks;
  d["boundary_solves"] = o.boundary_solves;
  d["tracked"] = o.tracked;
  d["kernel_evaluations"] = o.kernel_evaluations;
  d["status"] = to_string(o.status);
  d["seconds"] = o.seconds;
  d["canonical_seconds"] = o.canonical_seconds;
  return d;
}

void register_state_types(py::module_& m) {
  py::class_<Partition>(m, "Partition", "Margin / error / reserve token ids, ascending (docs/math.md §5).")
      .def_property_readonly(
          "margin", [](const Partition& p) { return to_numpy(p.margin); }, "0 < alpha < C, g = 0.")
      .def_property_readonly(
          "error", [](const Partition& p) { return to_numpy(p.error); }, "alpha = C, g <= 0.")
      .def_property_readonly(
          "reserve", [](const Partition& p) { return to_numpy(p.reserve); },
          "alpha = 0, g >= 0: evictable without changing any readout.")
      .def("__eq__", [](const Partition& a, const Partition& b) { return a == b; })
      .def("to_dict", &partition_to_dict);

  py::class_<KktReport>(m, "KktReport", "KKT residuals of a state.")
      .def_readonly("max_violation", &KktReport::max_violation)
      .def_readonly("sum_error", &KktReport::sum_error)
      .def_readonly("box_violation", &KktReport::box_violation)
      .def("to_dict", &kkt_to_dict);

  py::class_<State>(m, "State",
                    "The canonical state of a memory: a function of (settings, tokens).")
      .def_readonly("settings", &State::settings, "ProblemSettings the state was solved under.")
      .def_readonly("dim", &State::dim)
      .def_readonly("value_dim", &State::value_dim)
      .def_property_readonly(
          "ids", [](const State& s) { return to_numpy(s.ids); }, "int64, ascending.")
      .def_property_readonly(
          "alpha", [](const State& s) { return to_numpy(s.alpha); },
          "float64 coefficients aligned with ids.")
      .def_readonly("b", &State::b, "Multiplier of sum(alpha) = 1.")
      .def_readonly("partition", &State::partition)
      .def_readonly("kkt", &State::kkt)
      .def_property_readonly("status", [](const State& s) { return to_string(s.status); })
      .def_readonly("warmup", &State::warmup)
      .def_readonly("state_sha256", &State::state_sha256)
      .def("to_dict", &state_to_dict, "All fields; ids/alpha/partition as numpy arrays.")
      .def("__repr__", [](const State& s) {
        return "State(n=" + std::to_string(s.ids.size()) + ", status='" + to_string(s.status) +
               "', state_sha256='" + s.state_sha256 + "')";
      });

  py::class_<OpDiagnostics>(m, "OpDiagnostics", "Diagnostics of one memory operation (or a batch).")
      .def_readonly("ops", &OpDiagnostics::ops)
      .def_readonly("events", &OpDiagnostics::events)
      .def_readonly("zero_steps", &OpDiagnostics::zero_steps)
      .def_readonly("refused_entrants", &OpDiagnostics::refused_entrants)
      .def_readonly("refactorizations", &OpDiagnostics::refactorizations)
      .def_readonly("canonical_solves", &OpDiagnostics::canonical_solves)
      .def_readonly("repairs", &OpDiagnostics::repairs)
      .def_readonly("batch_fallbacks", &OpDiagnostics::batch_fallbacks)
      .def_readonly("boundary_solves", &OpDiagnostics::boundary_solves)
      .def_readonly("tracked", &OpDiagnostics::tracked)
      .def_readonly("kernel_evaluations", &OpDiagnostics::kernel_evaluations)
      .def_property_readonly("status", [](const OpDiagnostics& d) { return to_string(d.status); })
      .def_readonly("seconds", &OpDiagnostics::seconds)
      .def_readonly("canonical_seconds", &OpDiagnostics::canonical_seconds)
      .def("to_dict", &diagnostics_to_dict);
}

}  // namespace svattn::python
