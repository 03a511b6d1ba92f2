// svattn.Memory: the exact incremental/decremental memory (include/svattn/memory.h).
#include <pybind11/stl.h>

#include <cstring>
#include <memory>

#include "arrays.h"
#include "module.h"
#include "py_memory.h"
#include "state_types.h"

namespace svattn::python {

namespace {

void check_cols(const MatrixView& v, int expected, const char* what) {
  if (v.cols() != expected)
    throw py::value_error(std::string(what) + ": expected " + std::to_string(expected) +
                          " columns, got " + std::to_string(v.cols()));
}

// Applies f(row pointer) -> writes into out row for every row of q (GIL released by the caller).
template <typename F>
void for_each_row(const MatrixView& q, F&& f) {
  std::vector<double> buf(static_cast<std::size_t>(q.cols()));
  for (py::ssize_t r = 0; r < q.rows(); ++r) {
    const double* p = q.row_ptr(r);
    if (!p) {
      q.copy_row(r, buf.data());
      p = buf.data();
    }
    f(r, Eigen::Map<const Eigen::VectorXd>(p, q.cols()));
  }
}

py::array readout(PyMemory& pm, int dim, int value_dim, py::handle queries) {
  MatrixView q(queries, "queries", true);
  check_cols(q, dim, "queries");
  q.check_finite();
  py::array_t<double> out({q.rows(), static_cast<py::ssize_t>(value_dim)});
  double* o = out.mutable_data();
  pm.shared([&](const Memory& m) {
    for_each_row(q, [&](py::ssize_t r, const Eigen::Map<const Eigen::VectorXd>& row) {
      const Eigen::VectorXd v = m.readout(row);
      std::memcpy(o + r * value_dim, v.data(), sizeof(double) * value_dim);
    });
    return 0;
  });
  if (q.was_1d()) return out.reshape({static_cast<py::ssize_t>(value_dim)});
  return out;
}

py::object decision(PyMemory& pm, int dim, py::handle queries) {
  MatrixView q(queries, "queries", true);
  check_cols(q, dim, "queries");
  q.check_finite();
  py::array_t<double> out(q.rows());
  double* o = out.mutable_data();
  pm.shared([&](const Memory& m) {
    for_each_row(q, [&](py::ssize_t r, const Eigen::Map<const Eigen::VectorXd>& row) {
      o[r] = m.decision(row);
    });
    return 0;
  });
  if (q.was_1d()) return py::float_(o[0]);
  return std::move(out);
}

TokenSet token_set(py::handle ids, py::handle keys, py::handle values) {
  TokenSet t;
  t.ids = to_ids(ids, "ids");
  t.keys = MatrixView(keys, "keys", false).to_matrix();
  t.values = values.is_none() ? t.keys : MatrixView(values, "values", false).to_matrix();
  return t;
}

// The one row of a key/value argument: the array's own memory when it is contiguous float64 (no
// copy; the view holds the array), else converted into buf. Checks of size and finiteness are
// Memory::add's own (one pass, its messages).
Eigen::Map<const Eigen::VectorXd> row_arg(const MatrixView& v, const char* what,
                                          Eigen::VectorXd& buf) {
  if (v.rows() != 1) throw py::value_error(std::string(what) + ": expected one row");
  if (const double* p = v.row_ptr(0)) return {p, v.cols()};
  buf.resize(v.cols());
  v.copy_row(0, buf.data());
  return {buf.data(), v.cols()};
}

OpDiagnostics add(PyMemory& pm, py::handle id_obj, py::handle key, py::handle value) {
  const TokenId id = to_id(id_obj, "id");
  const MatrixView kv(key, "key", true);
  Eigen::VectorXd kbuf, vbuf;
  const auto k = row_arg(kv, "key", kbuf);
  if (value.is_none()) return pm.exclusive([&](Memory& m) { return m.add(id, k, k); });
  const MatrixView vv(value, "value", true);
  const auto v = row_arg(vv, "value", vbuf);
  return pm.exclusive([&](Memory& m) { return m.add(id, k, v); });
}

py::tuple tokens_tuple(const TokenSet& t) {
  return py::make_tuple(to_numpy(t.ids), to_numpy(t.keys), to_numpy(t.values));
}

void def_mutations(py::class_<PyMemory>& c) {
  c.def("add", &add, py::arg("id"), py::arg("key"), py::arg("value") = py::none(),
        "Adds one token (value defaults to the key). Raises AlreadyExistsError, ValueError.")
      .def(
          "add_batch",
          [](PyMemory& pm, py::handle ids, py::handle keys, py::handle values) {
            const TokenSet t = token_set(ids, keys, values);
            return pm.exclusive([&](Memory& m) { return m.add_batch(t); });
          },
          py::arg("ids"), py::arg("keys"), py::arg("values") = py::none(),
          "Adds tokens (rows of keys, values default to the keys); all ids must be new.")
      .def(
          "remove",
          [](PyMemory& pm, py::handle id_obj) {
            const TokenId id = to_id(id_obj, "id");
            return pm.exclusive([&](Memory& m) { return m.remove(id); });
          },
          py::arg("id"), "Removes one token exactly (raises KeyError when absent).")
      .def(
          "remove_batch",
          [](PyMemory& pm, py::handle ids) {
            const std::vector<TokenId> v = to_ids(ids, "ids");
            return pm.exclusive([&](Memory& m) { return m.remove_batch(v); });
          },
          py::arg("ids"), "Removes all ids exactly (all must be present).")
      .def(
          "evict_reserve",
          [](PyMemory& pm) {
            return to_numpy(pm.exclusive([&](Memory& m) { return m.evict_reserve(); }));
          },
          "Drops every reserve token; readouts stay bit-identical. Returns the evicted ids.");
}

void def_queries(py::class_<PyMemory>& c) {
  c.def(
       "readout",
       [](PyMemory& pm, py::handle q) { return readout(pm, pm.dim(), pm.value_dim(), q); },
       py::arg("queries"),
       "o(q) for a query (dim,) -> (value_dim,) or queries (m, dim) -> (m, value_dim).")
      .def(
          "decision", [](PyMemory& pm, py::handle q) { return decision(pm, pm.dim(), q); },
          py::arg("queries"), "f(q) >= 0 inside the description: float or (m,) array.")
      .def(
          "state", [](PyMemory& pm) { return pm.exclusive([](Memory& m) { return m.state(); }); },
          "The canonical State (ids ascending).")
      .def_property_readonly(
          "state_sha256",
          [](PyMemory& pm) { return pm.exclusive([](Memory& m) { return m.state_sha256(); }); },
          "SHA-256 of the canonical state (equals `svattn solve --json`'s state_sha256).")
      .def_property_readonly(
          "partition",
          [](PyMemory& pm) { return pm.exclusive([](Memory& m) { return m.state().partition; }); },
          "Margin / error / reserve ids.")
      .def(
          "alpha",
          [](PyMemory& pm, py::handle id_obj) {
            const TokenId id = to_id(id_obj, "id");
            return pm.exclusive([&](Memory& m) { return m.alpha(id); });
          },
          py::arg("id"), "Coefficient of a token (raises KeyError when absent).")
      .def(
          "tokens",
          [](PyMemory& pm) {
            return tokens_tuple(pm.exclusive([](Memory& m) { return m.tokens(); }));
          },
          "(ids, keys, values) of every token held, ascending id (copies).")
      .def("__contains__",
           [](PyMemory& pm, py::handle id_obj) {
             const TokenId id = to_id(id_obj, "id");
             return pm.exclusive([&](Memory& m) { return m.contains(id); });
           })
      .def("__len__", [](PyMemory& pm) { return pm.exclusive([](Memory& m) { return m.size(); }); })
      .def_property_readonly("dim", &PyMemory::dim)  // fixed: no lock, no GIL release
      .def_property_readonly("value_dim", &PyMemory::value_dim)
      .def_property_readonly(
          "settings",
          [](PyMemory& pm) { return pm.exclusive([](Memory& m) { return m.settings(); }); })
      .def_property_readonly("status",
                             [](PyMemory& pm) {
                               return to_string(pm.exclusive([](Memory& m) { return m.status(); }));
                             })
      .def_property_readonly(
          "totals", [](PyMemory& pm) { return pm.exclusive([](Memory& m) { return m.totals(); }); },
          "OpDiagnostics summed over the life of the memory.")
      .def_property_readonly(
          "evictions",
          [](PyMemory& pm) { return pm.exclusive([](Memory& m) { return m.evictions(); }); })
      .def(
          "check_invariants",
          [](PyMemory& pm) {
            pm.exclusive([](Memory& m) {
              m.check_invariants();
              return 0;
            });
          },
          "Checks internal invariants (raises RuntimeError on a violation). For tests.");
}

py::bytes to_bytes(PyMemory& pm) {
  const auto b = pm.exclusive([](Memory& m) { return m.serialize(); });
  return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
}

std::unique_ptr<PyMemory> from_bytes(const py::bytes& data) {
  const std::string s = data;
  std::vector<std::uint8_t> bytes(s.begin(), s.end());
  py::gil_scoped_release nogil;
  return std::make_unique<PyMemory>(Memory::deserialize(bytes));
}

void def_persistence(py::class_<PyMemory>& c) {
  c.def(
       "save",
       [](PyMemory& pm, const std::string& path) {
         pm.exclusive([&](Memory& m) {
           m.save(path);
           return 0;
         });
       },
       py::arg("path"), "Versioned binary file with a SHA-256 checksum.")
      .def_static(
          "load",
          [](const std::string& path) {
            py::gil_scoped_release nogil;
            return std::make_unique<PyMemory>(Memory::load(path));
          },
          py::arg("path"), "Reads a file written by save (raises OSError, FormatError).")
      .def("to_bytes", &to_bytes, "The serialized memory (the bytes save writes).")
      .def_static("from_bytes", &from_bytes, py::arg("data"), "Inverse of to_bytes.")
      .def(
          "copy",
          [](PyMemory& pm) {
            return std::make_unique<PyMemory>(pm.exclusive([](Memory& m) { return Memory(m); }));
          },
          "An independent deep copy.")
      .def("__copy__",
           [](PyMemory& pm) {
             return std::make_unique<PyMemory>(pm.exclusive([](Memory& m) { return Memory(m); }));
           })
      .def("__deepcopy__",
           [](PyMemory& pm, py::handle) {
             return std::make_unique<PyMemory>(pm.exclusive([](Memory& m) { return Memory(m); }));
           })
      .def(py::pickle([](PyMemory& pm) { return to_bytes(pm); },
                      [](const py::bytes& b) { return from_bytes(b); }));
}

}  // namespace

void register_memory(py::module_& m) {
  register_state_types(m);
  py::class_<PyMemory> c(
      m, "Memory",
      "The exact support-vector attention memory (docs/math.md §4, §5, §7): fp64, deterministic, "
      "with exact add and remove. Calls release the GIL; one object may be used "
      "from several threads.");
  c.def(py::init([](const MemorySettings& s, int dim, std::optional<int> value_dim) {
          const int dv = value_dim.value_or(dim);
          py::gil_scoped_release nogil;
          return std::make_unique<PyMemory>(Memory(s, dim, dv));
        }),
        py::arg("settings"), py::arg("dim"), py::arg("value_dim") = py::none(),
        "An empty memory for keys of `dim` and values of `value_dim` (default dim) columns.");
  def_mutations(c);
  def_queries(c);
  def_persistence(c);
}

}  // namespace svattn::python
