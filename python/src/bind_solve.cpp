// svattn.solve (batch reference solver, docs/math.md §9) and svattn.verify_state (docs/math.md §7).
#include <pybind11/stl.h>

#include "arrays.h"
#include "module.h"
#include "py_memory.h"
#include "settings_dict.h"
#include "state_types.h"
#include "svattn/batch_solver.h"
#include "svattn/certificate.h"

namespace svattn::python {

namespace {

TokenSet tokens_of(py::handle ids, py::handle keys, py::handle values) {
  TokenSet t;
  t.keys = MatrixView(keys, "keys", false).to_matrix();
  t.values = values.is_none() ? t.keys : MatrixView(values, "values", false).to_matrix();
  if (ids.is_none()) {
    t.ids.resize(static_cast<std::size_t>(t.keys.rows()));
    for (std::size_t i = 0; i < t.ids.size(); ++i) t.ids[i] = static_cast<TokenId>(i);
  } else {
    t.ids = to_ids(ids, "ids");
  }
  return t;
}

py::dict batch_diagnostics_to_dict(const BatchDiagnostics& b) {
  py::dict d;
  d["smo_iterations"] = b.smo_iterations;
  d["refine_iterations"] = b.refine_iterations;
  d["smo_seconds"] = b.smo_seconds;
  d["refine_seconds"] = b.refine_seconds;
  d["kernel_rows_computed"] = b.kernel_rows_computed;
  return d;
}

py::dict verify_to_dict(const VerifyReport& r) {
  py::dict d;
  d["ok"] = r.ok();
  d["feasible"] = r.feasible;
  d["kkt_ok"] = r.kkt_ok;
  d["unique"] = r.unique;
  d["hash_ok"] = r.hash_ok;
  d["uniqueness_reason"] = r.uniqueness_reason;
  d["error"] = r.error;
  d["kkt"] = kkt_to_dict(r.kkt);
  d["resolved"] = r.resolved;
  d["resolve_hash_equal"] = r.resolve_hash_equal;
  d["resolve_partition_equal"] = r.resolve_partition_equal;
  d["resolve_max_abs_dalpha"] = r.resolve_max_abs_dalpha;
  d["resolve_sha256"] = r.resolve_sha256;
  return d;
}

void register_results(py::module_& m) {
  py::class_<BatchDiagnostics>(m, "BatchDiagnostics", "Diagnostics of a batch solve.")
      .def_readonly("smo_iterations", &BatchDiagnostics::smo_iterations)
      .def_readonly("refine_iterations", &BatchDiagnostics::refine_iterations)
      .def_readonly("smo_seconds", &BatchDiagnostics::smo_seconds)
      .def_readonly("refine_seconds", &BatchDiagnostics::refine_seconds)
      .def_readonly("kernel_rows_computed", &BatchDiagnostics::kernel_rows_computed)
      .def("to_dict", &batch_diagnostics_to_dict);
  py::class_<BatchResult>(m, "BatchResult", "State and diagnostics of a batch solve.")
      .def_readonly("state", &BatchResult::state)
      .def_readonly("diagnostics", &BatchResult::diagnostics)
      .def("to_dict", [](const BatchResult& r) {
        py::dict d;
        d["state"] = state_to_dict(r.state);
        d["diagnostics"] = batch_diagnostics_to_dict(r.diagnostics);
        return d;
      });
  py::class_<VerifyReport>(m, "VerifyReport",
                           "Result of checking a state against its tokens (docs/math.md §7).")
      .def_property_readonly("ok", &VerifyReport::ok,
                             "feasible, KKT and hash hold (and re-solve equal).")
      .def_readonly("feasible", &VerifyReport::feasible)
      .def_readonly("kkt_ok", &VerifyReport::kkt_ok)
      .def_readonly("unique", &VerifyReport::unique)
      .def_readonly("hash_ok", &VerifyReport::hash_ok)
      .def_readonly("uniqueness_reason", &VerifyReport::uniqueness_reason)
      .def_readonly("error", &VerifyReport::error)
      .def_readonly("kkt", &VerifyReport::kkt)
      .def_readonly("resolved", &VerifyReport::resolved)
      .def_readonly("resolve_hash_equal", &VerifyReport::resolve_hash_equal)
      .def_readonly("resolve_partition_equal", &VerifyReport::resolve_partition_equal)
      .def_readonly("resolve_max_abs_dalpha", &VerifyReport::resolve_max_abs_dalpha)
      .def_readonly("resolve_sha256", &VerifyReport::resolve_sha256)
      .def("to_dict", &verify_to_dict);
}

}  // namespace

void register_solve(py::module_& m) {
  register_results(m);
  m.def(
      "_solve",
      [](py::handle keys, const BatchSettings& s, py::handle values, py::handle ids) {
        const TokenSet t = tokens_of(ids, keys, values);
        py::gil_scoped_release nogil;
        return solve_batch(t, s);
      },
      py::arg("keys"), py::arg("settings"), py::arg("values") = py::none(),
      py::arg("ids") = py::none());
  m.def(
      "_verify_state",
      [](py::handle keys, const State& state, const Tolerances& tol, bool resolve,
         py::handle values, py::handle ids) {
        const TokenSet t = tokens_of(ids, keys, values);
        py::gil_scoped_release nogil;
        return verify_state(t, state, tol, resolve);
      },
      py::arg("keys"), py::arg("state"), py::arg("tolerances"), py::arg("resolve"),
      py::arg("values") = py::none(), py::arg("ids") = py::none());
}

}  // namespace svattn::python
