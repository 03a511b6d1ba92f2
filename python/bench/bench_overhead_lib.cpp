// C++ side of the Python overhead benchmark (python/bench/bench_overhead.py, docs/performance.md
// "Python"): a small C ABI over svattn::Memory that the benchmark loads with ctypes, so that the
// C++ calls and the Python calls run in one process, alternating call by call, under the same
// cache state, CPU frequency and machine load. Each function times its own svattn::Memory call with
// steady_clock and returns the seconds; errors are reported as a negative time.
#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "svattn/memory.h"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Bench {
  svattn::Memory memory;
  svattn::RowMatrix out;
};

}  // namespace

extern "C" {

/// A memory holding the n x dim row-major keys base (values = keys, ids 0..n-1); nullptr on error.
void* svattn_bench_create(const double* base, long n, int dim, double bandwidth, double C) {
  try {
    svattn::MemorySettings s;
    s.problem.kernel.bandwidth = bandwidth;
    s.problem.C = C;
    auto b = std::make_unique<Bench>(Bench{svattn::Memory(s, dim, dim), {}});
    svattn::RowMatrix keys = Eigen::Map<const svattn::RowMatrix>(base, n, dim);
    b->memory.add_batch(svattn::TokenSet::from_rows(keys));
    return b.release();
  } catch (...) {
    return nullptr;
  }
}

void svattn_bench_free(void* h) { delete static_cast<Bench*>(h); }

double svattn_bench_add(void* h, long id, const double* key) {
  auto& m = static_cast<Bench*>(h)->memory;
  try {
    const auto t0 = Clock::now();
    const Eigen::Map<const Eigen::VectorXd> k(key, m.dim());
    m.add(id, k, k);
    return since(t0);
  } catch (...) {
    return -1;
  }
}

double svattn_bench_remove(void* h, long id) {
  try {
    const auto t0 = Clock::now();
    static_cast<Bench*>(h)->memory.remove(id);
    return since(t0);
  } catch (...) {
    return -1;
  }
}

/// Reads out the rows of the m x dim row-major queries into a C++-owned output (as a user's loop
/// over Memory::readout would).
double svattn_bench_readout(void* h, const double* queries, long rows) {
  Bench& b = *static_cast<Bench*>(h);
  try {
    const auto t0 = Clock::now();
    const int d = b.memory.dim();
    b.out.resize(rows, b.memory.value_dim());
    for (long q = 0; q < rows; ++q)
      b.out.row(q) =
          b.memory.readout(Eigen::Map<const Eigen::VectorXd>(queries + q * d, d)).transpose();
    return since(t0);
  } catch (...) {
    return -1;
  }
}

/// Writes the 64 hex digits of the state hash and a terminating NUL into out[0..65).
void svattn_bench_state_sha256(void* h, char* out) {
  const std::string s = static_cast<Bench*>(h)->memory.state_sha256();
  std::memcpy(out, s.c_str(), s.size() + 1);
}

}  // extern "C"
