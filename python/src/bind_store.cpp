// svattn.Store: the audited SQLite memory store (include/svattn/store.h, docs/store.md). Every call
// releases the GIL and holds the object's lock; the store itself serialises processes by SQLite
// locks (StoreBusyError after the busy timeout).
#include <pybind11/stl.h>

#include <memory>
#include <mutex>

#include "arrays.h"
#include "module.h"
#include "py_memory.h"
#include "state_types.h"
#include "svattn/store.h"
#include "svattn/store_evidence.h"

namespace svattn::python {

namespace {

py::object json_to_python(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

class PyStore {
 public:
  PyStore(const std::string& path, const StoreOptions& o) {
    py::gil_scoped_release nogil;
    store_ = std::make_unique<Store>(path, o);
  }
  /// Runs f(Store&) with the GIL released and the object's lock held.
  template <typename F>
  auto run(F&& f) {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    if (!store_) throw InvalidArgument("store: the store is closed");
    return f(*store_);
  }
  void close() {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    store_.reset();
  }

 private:
  std::mutex mu_;
  std::unique_ptr<Store> store_;
};

void register_store_types(py::module_& m) {
  py::class_<AuditEntry>(m, "AuditEntry", "One row of the hash-chained audit log (docs/store.md).")
      .def_readonly("seq", &AuditEntry::seq)
      .def_readonly("time_utc", &AuditEntry::time_utc)
      .def_readonly("operation", &AuditEntry::operation)
      .def_readonly("memory", &AuditEntry::memory)
      .def_readonly("record", &AuditEntry::record)
      .def_readonly("token_count", &AuditEntry::token_count)
      .def_readonly("state_before", &AuditEntry::state_before)
      .def_readonly("state_after", &AuditEntry::state_after)
      .def_readonly("certificate", &AuditEntry::certificate,
                    "Compact JSON text (never keys or values).")
      .def_readonly("prev_hash", &AuditEntry::prev_hash)
      .def_readonly("entry_hash", &AuditEntry::entry_hash)
      .def("to_dict", [](const AuditEntry& e) { return json_to_python(audit_entry_to_json(e)); });
  py::class_<RecordInfo>(m, "RecordInfo", "A record of a memory in the store.")
      .def_readonly("record", &RecordInfo::record)
      .def_readonly("tokens", &RecordInfo::tokens)
      .def_readonly("suspended", &RecordInfo::suspended);
  py::class_<MemoryInfo>(m, "MemoryInfo", "Description of a memory in the store.")
      .def_readonly("name", &MemoryInfo::name)
      .def_readonly("settings", &MemoryInfo::settings)
      .def_readonly("dim", &MemoryInfo::dim)
      .def_readonly("value_dim", &MemoryInfo::value_dim)
      .def_readonly("tokens", &MemoryInfo::tokens)
      .def_readonly("stored_tokens", &MemoryInfo::stored_tokens)
      .def_readonly("records", &MemoryInfo::records)
      .def_readonly("suspended_records", &MemoryInfo::suspended_records)
      .def_readonly("state_sha256", &MemoryInfo::state_sha256)
      .def_readonly("last_audit_seq", &MemoryInfo::last_audit_seq);
  py::class_<MemoryVerification>(m, "MemoryVerification", "Per-memory part of Store.verify().")
      .def_readonly("name", &MemoryVerification::name)
      .def_readonly("tokens", &MemoryVerification::tokens)
      .def_readonly("stored_sha256", &MemoryVerification::stored_sha256)
      .def_readonly("resolved_sha256", &MemoryVerification::resolved_sha256)
      .def_readonly("resolve_equal", &MemoryVerification::resolve_equal)
      .def_readonly("report", &MemoryVerification::report)
      .def_readonly("audit_consistent", &MemoryVerification::audit_consistent)
      .def_property_readonly("ok", &MemoryVerification::ok);
  py::class_<StoreVerification>(m, "StoreVerification",
                                "Result of Store.verify() (from the file alone).")
      .def_readonly("integrity_ok", &StoreVerification::integrity_ok)
      .def_readonly("chain_ok", &StoreVerification::chain_ok)
      .def_readonly("audit_entries", &StoreVerification::audit_entries)
      .def_readonly("audit_head", &StoreVerification::audit_head)
      .def_readonly("memories", &StoreVerification::memories)
      .def_readonly("problems", &StoreVerification::problems)
      .def_property_readonly("ok", &StoreVerification::ok)
      .def("to_dict",
           [](const StoreVerification& v) { return json_to_python(verification_to_json(v)); });
}

void def_records(py::class_<PyStore>& c) {
  c.def(
       "create_memory",
       [](PyStore& s, const std::string& name, const MemorySettings& settings, int dim,
          std::optional<int> value_dim) {
         return s.run([&](Store& st) {
           return st.create_memory(name, settings, dim, value_dim.value_or(dim)).entry;
         });
       },
       py::arg("name"), py::arg("settings"), py::arg("dim"), py::arg("value_dim") = py::none(),
       "Creates an empty memory; returns its audit entry.")
      .def(
          "add_record",
          [](PyStore& s, const std::string& name, std::int64_t record, py::handle keys,
             py::handle values) {
            const RowMatrix k = MatrixView(keys, "keys", false).to_matrix();
            const bool has_v = !values.is_none();
            const RowMatrix v =
                has_v ? MatrixView(values, "values", false).to_matrix() : RowMatrix();
            return s.run([&](Store& st) {
              return st.add_record(name, record, k, has_v ? &v : nullptr).entry;
            });
          },
          py::arg("name"), py::arg("record"), py::arg("keys"), py::arg("values") = py::none(),
          "Adds a record (token positions = row indices); returns its audit entry.")
      .def(
          "import_records",
          [](PyStore& s, const std::string& name, py::iterable records) {
            std::vector<AuditEntry> out;
            for (py::handle item : records) {
              py::tuple t = py::reinterpret_borrow<py::object>(item).cast<py::tuple>();
              if (t.size() != 2 && t.size() != 3)
                throw py::value_error("import_records: each item must be (record, keys[, values])");
              const auto record = t[0].cast<std::int64_t>();
              const RowMatrix k = MatrixView(t[1], "keys", false).to_matrix();
              const bool has_v = t.size() == 3 && !t[2].is_none();
              const RowMatrix v =
                  has_v ? MatrixView(t[2], "values", false).to_matrix() : RowMatrix();
              out.push_back(s.run([&](Store& st) {
                return st.add_record(name, record, k, has_v ? &v : nullptr).entry;
              }));
            }
            return out;
          },
          py::arg("name"), py::arg("records"),
          "Adds every (record, keys[, values]) item, one audited transaction each.")
      .def(
          "forget_record",
          [](PyStore& s, const std::string& name, std::int64_t record) {
            return s.run([&](Store& st) { return st.forget_record(name, record).certificate; });
          },
          py::arg("name"), py::arg("record"),
          "Erases a record exactly; returns its RemovalCertificate (also in the audit log).")
      .def(
          "suspend",
          [](PyStore& s, const std::string& name, std::int64_t record) {
            return s.run([&](Store& st) { return st.suspend_record(name, record).entry; });
          },
          py::arg("name"), py::arg("record"), "Reversible exclusion of a record.")
      .def(
          "resume",
          [](PyStore& s, const std::string& name, std::int64_t record) {
            return s.run([&](Store& st) { return st.resume_record(name, record).entry; });
          },
          py::arg("name"), py::arg("record"), "Adds a suspended record's tokens back.");
}

void def_queries(py::class_<PyStore>& c) {
  c.def(
       "query",
       [](PyStore& s, const std::string& name, py::handle queries) {
         MatrixView q(queries, "queries", false);
         q.check_finite();
         const RowMatrix qm = q.to_matrix();
         return to_numpy(s.run([&](Store& st) { return st.query(name, qm); }));
       },
       py::arg("name"), py::arg("queries"), "Readouts (m, value_dim) of the rows of queries.")
      .def(
          "decision",
          [](PyStore& s, const std::string& name, py::handle queries) {
            MatrixView q(queries, "queries", false);
            q.check_finite();
            const RowMatrix qm = q.to_matrix();
            return to_numpy(s.run([&](Store& st) { return st.decision(name, qm); }));
          },
          py::arg("name"), py::arg("queries"))
      .def(
          "memory",
          [](PyStore& s, const std::string& name) {
            return std::make_unique<PyMemory>(
                s.run([&](Store& st) { return Memory(st.memory(name)); }));
          },
          py::arg("name"), "A copy of the in-RAM memory.")
      .def("memory_names",
           [](PyStore& s) { return s.run([](Store& st) { return st.memory_names(); }); })
      .def(
          "memory_info",
          [](PyStore& s, const std::string& n) {
            return s.run([&](Store& st) { return st.memory_info(n); });
          },
          py::arg("name"))
      .def(
          "records",
          [](PyStore& s, const std::string& n) {
            return s.run([&](Store& st) { return st.records(n); });
          },
          py::arg("name"))
      .def(
          "stored_state",
          [](PyStore& s, const std::string& n) {
            return s.run([&](Store& st) { return st.stored_state(n); });
          },
          py::arg("name"))
      .def(
          "verify", [](PyStore& s) { return s.run([](Store& st) { return st.verify(); }); },
          "Checks integrity, the audit chain and every memory from the file alone.")
      .def(
          "audit", [](PyStore& s) { return s.run([](Store& st) { return st.audit(); }); },
          "The audit log, oldest first.")
      .def_property_readonly("path",
                             [](PyStore& s) { return s.run([](Store& st) { return st.path(); }); })
      .def("close", &PyStore::close,
           "Checkpoints the WAL and closes; later calls raise ValueError.");
}

// export_memory and erasure_receipt (docs/audit.md), each opening the store read-only.
void register_evidence(py::module_& m) {
  m.def(
      "export_memory",
      [](const std::string& path, const std::string& memory, const std::string& out_dir,
         const std::string& master_key_file) {
        StoreOptions o;
        o.master_key_file = master_key_file;
        MemoryExport e;
        {
          py::gil_scoped_release nogil;
          e = export_memory(path, o, memory, out_dir);
        }
        py::dict d;
        d["directory"] = e.directory;
        d["memory"] = e.memory;
        d["tokens"] = e.tokens;
        d["records"] = e.records;
        d["state_sha256"] = e.state_sha256;
        d["files"] = e.files;
        return d;
      },
      py::arg("path"), py::arg("memory"), py::arg("out_dir"), py::arg("master_key_file") = "");
  m.def(
      "erasure_receipt",
      [](const std::string& path, const std::string& memory, std::int64_t record,
         const std::string& reason, const std::vector<std::string>& backups,
         const std::string& format, const std::string& master_key_file) {
        if (format != "md" && format != "html")
          throw InvalidArgument("format must be 'md' or 'html', got '" + format + "'");
        StoreOptions o;
        o.master_key_file = master_key_file;
        ErasureReceipt r;
        {
          py::gil_scoped_release nogil;
          r = erasure_receipt(path, o, memory, record, reason, backups);
        }
        py::dict d;
        d["ok"] = r.ok();
        d["failure"] = r.first_failure();
        d["receipt"] = json_to_python(r.to_json());
        d["text"] = r.ok() ? py::cast(format == "html" ? render_receipt_html(r)
                                                       : render_receipt_markdown(r))
                           : py::none();
        return d;
      },
      py::arg("path"), py::arg("memory"), py::arg("record"), py::arg("reason") = "",
      py::arg("backups") = std::vector<std::string>{}, py::arg("format") = "md",
      py::arg("master_key_file") = "");
}

}  // namespace

void register_store(py::module_& m) {
  register_evidence(m);
  register_store_types(m);
  m.def("store_token_id", &store_token_id, py::arg("record"), py::arg("position"),
        "Token id of (record, position): record << 23 | position.");
  m.attr("POSITION_BITS") = kPositionBits;
  py::class_<PyStore> c(m, "_Store");
  c.def(py::init([](const std::string& path, bool create, int busy_timeout_ms, bool check_on_open,
                    bool certificate_check, bool certificate_reference, bool certificate_resolve,
                    int certificate_probes, const std::string& master_key_file,
                    const std::string& master_key_env) {
          StoreOptions o;
          o.master_key_file = master_key_file;  // docs/store.md "Master key"
          o.master_key_env = master_key_env;
          o.create = create;
          o.busy_timeout_ms = busy_timeout_ms;
          o.check_on_open = check_on_open;
          o.certificate_check = certificate_check;
          o.certificate_reference = certificate_reference;
          o.certificate_resolve = certificate_resolve;
          o.certificate_probes = certificate_probes;
          return std::make_unique<PyStore>(path, o);
        }),
        py::arg("path"), py::kw_only(), py::arg("create") = false,
        py::arg("busy_timeout_ms") = StoreOptions{}.busy_timeout_ms,
        py::arg("check_on_open") = StoreOptions{}.check_on_open,
        py::arg("certificate_check") = StoreOptions{}.certificate_check,
        py::arg("certificate_reference") = StoreOptions{}.certificate_reference,
        py::arg("certificate_resolve") = StoreOptions{}.certificate_resolve,
        py::arg("certificate_probes") = StoreOptions{}.certificate_probes,
        py::arg("master_key_file") = std::string(), py::arg("master_key_env") = std::string());
  def_records(c);
  def_queries(c);
}

}  // namespace svattn::python
