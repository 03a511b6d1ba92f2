// C++ side of the Python overhead benchmark (python/bench/bench_overhead.py, docs/performance.md
// "Python"): a small pybind11 module, loaded next to svattn._core, whose functions call
// svattn::Memory on the SAME object as a given svattn.Memory (pybind11 shares the registered
// PyMemory type between the two modules) and return the (wall, thread CPU) seconds of that call
// measured inside C++ around the whole svattn::Memory call (its argument checks included). The
// Python calls and these C++ calls alternate on one memory, so both run the same operation on the
// same state, under the same cache state, CPU frequency and machine load. Built only with
// SVATTN_BUILD_BENCH.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <time.h>

#include <tuple>
#include <utility>

#include "py_memory.h"
#include "support/clock.h"

namespace svattn::python {

namespace {

using support::Stopwatch;
using Seconds = std::pair<double, double>;  // (wall, thread CPU)
// (wall, thread CPU, OpDiagnostics::seconds): the last is what the operation's own timer saw.
using OpSeconds = std::tuple<double, double, double>;

// CPU time of the calling thread (the clock of Python's time.thread_time): the calls run on the
// calling thread, and unlike the wall time it does not count time other processes hold the core.
double thread_cpu() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Runs f() and returns its (wall, thread CPU) seconds.
template <typename F>
Seconds timed(F&& f) {
  const double c0 = thread_cpu();
  const Stopwatch watch;
  f();
  const double wall = watch.seconds();
  return {wall, thread_cpu() - c0};
}

using Rows = py::array_t<double, py::array::c_style | py::array::forcecast>;

Eigen::Map<const Eigen::VectorXd> row_of(const Rows& a, py::ssize_t r, int dim) {
  if (a.ndim() < 1 || a.shape(a.ndim() - 1) != dim)
    throw py::value_error("expected rows of " + std::to_string(dim) + " columns");
  return Eigen::Map<const Eigen::VectorXd>(a.data() + r * dim, dim);
}

OpSeconds add(PyMemory& pm, TokenId id, const Rows& key) {
  const auto k = row_of(key, 0, pm.dim());
  return pm.exclusive([&](Memory& m) {
    OpDiagnostics d;
    const Seconds s = timed([&] { d = m.add(id, k, k); });
    return OpSeconds{s.first, s.second, d.seconds};
  });
}

OpSeconds remove(PyMemory& pm, TokenId id) {
  return pm.exclusive([&](Memory& m) {
    OpDiagnostics d;
    const Seconds s = timed([&] { d = m.remove(id); });
    return OpSeconds{s.first, s.second, d.seconds};
  });
}

// Reads out every row of queries into a C++-owned output, as a user's loop over Memory::readout.
// Under the exclusive lock: the memory then builds its support cache lazily inside the first
// readout, i.e. inside the timer, as in a C++ user's loop (PyMemory::shared would build it
// before the timer and leave that cost to the Python side alone).
Seconds readout(PyMemory& pm, const Rows& queries) {
  const int d = pm.dim();
  const py::ssize_t rows = queries.ndim() == 2 ? queries.shape(0) : 1;
  row_of(queries, 0, d);
  RowMatrix out(rows, pm.value_dim());
  return pm.exclusive([&](const Memory& m) {
    return timed([&] {
      for (py::ssize_t q = 0; q < rows; ++q)
        out.row(q) = m.readout(row_of(queries, q, d)).transpose();
    });
  });
}

// Seconds of `reps` GIL release + reacquire pairs (what PyMemory::exclusive adds), per pair.
double gil_roundtrip(int reps) {
  const Stopwatch watch;
  for (int i = 0; i < reps; ++i) py::gil_scoped_release nogil;
  return watch.seconds() / reps;
}

}  // namespace

PYBIND11_MODULE(_svattn_bench_overhead, m) {
  m.doc() = "C++ side of python/bench/bench_overhead.py (timed inside C++, same memory object).";
  m.def("add", &add, py::arg("memory"), py::arg("id"), py::arg("key"),
        "(wall, CPU, OpDiagnostics.seconds) of svattn::Memory::add(id, key, key) on memory's "
        "object.");
  m.def("remove", &remove, py::arg("memory"), py::arg("id"),
        "(wall, CPU, OpDiagnostics.seconds) of svattn::Memory::remove(id).");
  m.def("readout", &readout, py::arg("memory"), py::arg("queries"),
        "(wall, CPU) seconds of Memory::readout over every row of queries.");
  m.def(
      "noop", [](PyMemory&, TokenId, py::handle) {}, py::arg("memory"), py::arg("id"),
      py::arg("key"), "Does nothing: the interpreter + pybind11 dispatch floor of add's call.");
  m.def("gil_roundtrip", &gil_roundtrip, py::arg("reps"),
        "Seconds per GIL release + reacquire, averaged over reps.");
}

}  // namespace svattn::python
