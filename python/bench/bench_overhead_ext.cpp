// C++ side of the Python overhead benchmark (python/bench/bench_overhead.py, docs/performance.md
// "Python"): a small pybind11 module, loaded next to svattn._core, whose functions call
// svattn::Memory on the SAME object as a given svattn.Memory (pybind11 shares the registered
// PyMemory type between the two modules) and return the seconds of that call measured inside C++
// around the whole svattn::Memory call (its argument checks included). The Python calls and these
// C++ calls alternate on one memory, so both run the same operation on the same state, under the
// same cache state, CPU frequency and machine load. Built only with SVATTN_BUILD_BENCH.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <chrono>

#include "py_memory.h"

namespace svattn::python {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

using Rows = py::array_t<double, py::array::c_style | py::array::forcecast>;

Eigen::Map<const Eigen::VectorXd> row_of(const Rows& a, py::ssize_t r, int dim) {
  if (a.ndim() < 1 || a.shape(a.ndim() - 1) != dim)
    throw py::value_error("expected rows of " + std::to_string(dim) + " columns");
  return Eigen::Map<const Eigen::VectorXd>(a.data() + r * dim, dim);
}

double add(PyMemory& pm, TokenId id, const Rows& key) {
  const auto k = row_of(key, 0, pm.dim());
  return pm.exclusive([&](Memory& m) {
    const auto t0 = Clock::now();
    m.add(id, k, k);
    return since(t0);
  });
}

double remove(PyMemory& pm, TokenId id) {
  return pm.exclusive([&](Memory& m) {
    const auto t0 = Clock::now();
    m.remove(id);
    return since(t0);
  });
}

// Reads out every row of queries into a C++-owned output, as a user's loop over Memory::readout.
double readout(PyMemory& pm, const Rows& queries) {
  const int d = pm.dim();
  const py::ssize_t rows = queries.ndim() == 2 ? queries.shape(0) : 1;
  row_of(queries, 0, d);
  RowMatrix out(rows, pm.value_dim());
  return pm.shared([&](const Memory& m) {
    const auto t0 = Clock::now();
    for (py::ssize_t q = 0; q < rows; ++q)
      out.row(q) = m.readout(row_of(queries, q, d)).transpose();
    return since(t0);
  });
}

// Seconds of `reps` GIL release + reacquire pairs (what PyMemory::exclusive adds), per pair.
double gil_roundtrip(int reps) {
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) py::gil_scoped_release nogil;
  return since(t0) / reps;
}

}  // namespace

PYBIND11_MODULE(_svattn_bench_overhead, m) {
  m.doc() = "C++ side of python/bench/bench_overhead.py (timed inside C++, same memory object).";
  m.def("add", &add, py::arg("memory"), py::arg("id"), py::arg("key"),
        "Seconds of svattn::Memory::add(id, key, key) on memory's C++ object.");
  m.def("remove", &remove, py::arg("memory"), py::arg("id"),
        "Seconds of svattn::Memory::remove(id).");
  m.def("readout", &readout, py::arg("memory"), py::arg("queries"),
        "Seconds of Memory::readout over every row of queries.");
  m.def(
      "noop", [](PyMemory&, TokenId, py::handle) {}, py::arg("memory"), py::arg("id"),
      py::arg("key"), "Does nothing: the interpreter + pybind11 dispatch floor of add's call.");
  m.def("gil_roundtrip", &gil_roundtrip, py::arg("reps"),
        "Seconds per GIL release + reacquire, averaged over reps.");
}

}  // namespace svattn::python
