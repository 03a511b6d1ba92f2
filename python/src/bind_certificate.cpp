// svattn.RemovalCertificate and its parts (include/svattn/certificate.h) as typed read-only
// objects, and svattn.removal_certificate. to_json is the C++ RemovalCertificate::to_json.
#include <pybind11/stl.h>

#include "arrays.h"
#include "module.h"
#include "py_memory.h"
#include "state_types.h"
#include "svattn/certificate.h"
#include "svattn/errors.h"

namespace svattn::python {

namespace {

py::object loads(const std::string& text) {
  return py::module_::import("json").attr("loads")(text);
}

void register_parts(py::module_& m) {
  py::class_<StateSummary>(m, "StateSummary",
                           "Sizes and hash of a state (certificate before/after).")
      .def_readonly("n", &StateSummary::n)
      .def_readonly("margin", &StateSummary::margin)
      .def_readonly("error", &StateSummary::error)
      .def_readonly("reserve", &StateSummary::reserve)
      .def_readonly("state_sha256", &StateSummary::state_sha256)
      .def_property_readonly("status", [](const StateSummary& s) { return to_string(s.status); })
      .def_readonly("kkt", &StateSummary::kkt);
  py::class_<OptimalityCheck>(m, "OptimalityCheck",
                              "The certificate's optimality check (JSON verify).")
      .def_readonly("performed", &OptimalityCheck::performed)
      .def_property_readonly(
          "argument", [](const OptimalityCheck& c) { return to_string(c.argument); },
          "'none' | 'full' | 'reference'.")
      .def_readonly("checks", &OptimalityCheck::checks)
      .def_readonly("feasible", &OptimalityCheck::feasible)
      .def_readonly("kkt_ok", &OptimalityCheck::kkt_ok)
      .def_readonly("max_kkt_violation", &OptimalityCheck::max_kkt_violation)
      .def_readonly("unique", &OptimalityCheck::unique)
      .def_readonly("uniqueness_reason", &OptimalityCheck::uniqueness_reason)
      .def_readonly("hash_ok", &OptimalityCheck::hash_ok)
      .def_readonly("reference_sha256", &OptimalityCheck::reference_sha256)
      .def_readonly("note", &OptimalityCheck::note)
      .def_property_readonly("ok", &OptimalityCheck::ok, "performed, feasible, KKT and hash hold.");
  py::class_<ResolveCheck>(m, "ResolveCheck", "The from-scratch re-solve comparison (JSON check).")
      .def_readonly("performed", &ResolveCheck::performed)
      .def_readonly("retrained_sha256", &ResolveCheck::retrained_sha256)
      .def_readonly("hash_equal", &ResolveCheck::hash_equal)
      .def_readonly("partition_equal", &ResolveCheck::partition_equal)
      .def_readonly("max_abs_dalpha", &ResolveCheck::max_abs_dalpha)
      .def_readonly("max_abs_ddecision", &ResolveCheck::max_abs_ddecision)
      .def_readonly("max_abs_dreadout", &ResolveCheck::max_abs_dreadout)
      .def_readonly("probes", &ResolveCheck::probes)
      .def_readonly("retrain_seconds", &ResolveCheck::retrain_seconds);
  py::class_<StoreErasure>(m, "StoreErasure", "Where a store erased the record (JSON store).")
      .def_readonly("path", &StoreErasure::path)
      .def_readonly("memory", &StoreErasure::memory)
      .def_readonly("record", &StoreErasure::record)
      .def_readonly("record_was_suspended", &StoreErasure::record_was_suspended)
      .def_readonly("token_rows_erased", &StoreErasure::token_rows_erased)
      .def_readonly("tokens_removed_from_memory", &StoreErasure::tokens_removed_from_memory)
      .def_readonly("secure_delete", &StoreErasure::secure_delete)
      .def_readonly("encryption", &StoreErasure::encryption)
      .def_readonly("data_key_id", &StoreErasure::data_key_id)
      .def_readonly("data_key_sha256", &StoreErasure::data_key_sha256)
      .def_readonly("data_key_destroyed", &StoreErasure::data_key_destroyed)
      .def_readonly("bounds_group", &StoreErasure::bounds_group,
                    "The record's bounds group (-1: none, an older store).")
      .def_readonly("bounds_key_id", &StoreErasure::bounds_key_id)
      .def_readonly("bounds_key_sha256", &StoreErasure::bounds_key_sha256)
      .def_readonly("bounds_key_destroyed", &StoreErasure::bounds_key_destroyed)
      .def_readonly("erasure_basis", &StoreErasure::erasure_basis);
}

void register_certificate_class(py::module_& m) {
  py::class_<RemovalCertificate>(m, "RemovalCertificate",
                                 "Certificate of an exact removal (docs/math.md §7, docs/api.md "
                                 "\"Certificates\"): removed ids, states before/after, the "
                                 "optimality check and the optional re-solve comparison.")
      .def_readonly("certificate", &RemovalCertificate::certificate)
      .def_property_readonly("mode", [](const RemovalCertificate& c) { return to_string(c.mode); })
      .def_readonly("settings", &RemovalCertificate::settings)
      .def_readonly("record_id", &RemovalCertificate::record_id)
      .def_property_readonly(
          "removed_ids", [](const RemovalCertificate& c) { return to_numpy(c.removed_ids); },
          "int64, ascending.")
      .def_readonly("before", &RemovalCertificate::before)
      .def_readonly("after", &RemovalCertificate::after)
      .def_readonly("solver", &RemovalCertificate::solver)
      .def_readonly("evictions", &RemovalCertificate::evictions)
      .def_readonly("verify", &RemovalCertificate::verify)
      .def_readonly("check", &RemovalCertificate::check)
      .def_readonly("store", &RemovalCertificate::store, "StoreErasure or None.")
      .def_readonly("scope", &RemovalCertificate::scope)
      .def_readonly("limits", &RemovalCertificate::limits)
      .def(
          "to_json",
          [](const RemovalCertificate& c, int indent) { return c.to_json().dump(indent); },
          py::arg("indent") = -1, "The certificate's JSON text (the v1 field names).")
      .def(
          "to_dict", [](const RemovalCertificate& c) { return loads(c.to_json().dump()); },
          "The JSON object as a dict.")
      .def_static(
          "from_json",
          [](const std::string& text) {
            nlohmann::json j;
            try {
              j = nlohmann::json::parse(text);
            } catch (const nlohmann::json::exception& e) {
              throw FormatError(std::string("certificate: not JSON: ") + e.what());
            }
            return RemovalCertificate::from_json(j);
          },
          py::arg("text"), "Parses to_json()'s text (raises FormatError naming the field).")
      .def("__eq__",
           [](const RemovalCertificate& a, const RemovalCertificate& b) { return a == b; })
      .def("__repr__", [](const RemovalCertificate& c) {
        return "RemovalCertificate(removed=" + std::to_string(c.removed_ids.size()) +
               ", verify=" + (c.verify.ok() ? "ok" : "not ok") + ", after='" +
               c.after.state_sha256 + "')";
      });
}

}  // namespace

void register_certificate(py::module_& m) {
  register_parts(m);
  register_certificate_class(m);
  m.def(
      "_removal_certificate",
      [](const State& before, PyMemory& after, py::handle removed, const std::string& record_id,
         const OpDiagnostics& diag, bool optimality_check, bool allow_reference, bool resolve,
         py::handle probes) {
        const std::vector<TokenId> ids = to_ids(removed, "removed");
        const RowMatrix p = probes.is_none() ? RowMatrix(0, before.dim)
                                             : MatrixView(probes, "probes", false).to_matrix();
        CertificateOptions o;
        o.optimality_check = optimality_check;
        o.allow_reference = allow_reference;
        o.resolve = resolve;
        return after.exclusive(
            [&](Memory& m) { return removal_certificate(before, m, ids, record_id, diag, o, p); });
      },
      py::arg("before"), py::arg("after_memory"), py::arg("removed"), py::arg("record_id"),
      py::arg("diagnostics"), py::arg("optimality_check"), py::arg("allow_reference"),
      py::arg("resolve"), py::arg("probes") = py::none());
}

}  // namespace svattn::python
