// C++ side of the Python overhead benchmark (python/bench/bench_overhead.py runs both in one run):
// the same Memory.add / remove / 1,000-query readout workload on the same .npy data, timed with
// steady_clock. Prints one JSON line: {"add_s": [...], "remove_s": [...], "readout_s": [...]}.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "svattn/io.h"
#include "svattn/memory.h"

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
void print(const char* name, const std::vector<double>& v, bool last) {
  std::printf("\"%s\": [", name);
  for (std::size_t i = 0; i < v.size(); ++i) std::printf("%s%.9e", i ? ", " : "", v[i]);
  std::printf("]%s", last ? "" : ", ");
}
}  // namespace

// argv: base.npy extra.npy queries.npy bandwidth C reps
int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: bench_overhead BASE.npy EXTRA.npy QUERIES.npy BANDWIDTH C REPS\n");
    return 2;
  }
  const svattn::RowMatrix base = svattn::read_matrix(argv[1]);
  const svattn::RowMatrix extra = svattn::read_matrix(argv[2]);
  const svattn::RowMatrix queries = svattn::read_matrix(argv[3]);
  svattn::MemorySettings s;
  s.problem.kernel.bandwidth = std::stod(argv[4]);
  s.problem.C = std::stod(argv[5]);
  const int reps = std::stoi(argv[6]);
  svattn::Memory m(s, static_cast<int>(base.cols()), static_cast<int>(base.cols()));
  m.add_batch(svattn::TokenSet::from_rows(base));
  std::vector<double> add_s, remove_s, readout_s;
  const svattn::TokenId first = base.rows();
  for (int r = 0; r < reps; ++r) {
    const Eigen::VectorXd k = extra.row(r % extra.rows()).transpose();
    double t0 = now();
    m.add(first + r, k, k);
    add_s.push_back(now() - t0);
    t0 = now();
    m.remove(first + r);
    remove_s.push_back(now() - t0);
    t0 = now();
    svattn::RowMatrix out(queries.rows(), m.value_dim());
    for (Eigen::Index q = 0; q < queries.rows(); ++q)
      out.row(q) = m.readout(queries.row(q).transpose()).transpose();
    readout_s.push_back(now() - t0);
  }
  std::printf("{");
  print("add_s", add_s, false);
  print("remove_s", remove_s, false);
  print("readout_s", readout_s, true);
  std::printf(", \"state_sha256\": \"%s\"}\n", m.state_sha256().c_str());
  return 0;
}
