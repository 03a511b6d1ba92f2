// The store's operations on SQLite and PostgreSQL in one run (docs/performance.md "PostgreSQL
// backend"): import, open (first use of a memory in a new Store: rows read, restored), forget of
// a reserve-only and of a support record, add, query, through the library. Gaussian keys, one
// record = `record` consecutive rows, encrypted stores (keys in a local key store file).
//   bench_store_backends --pg URI [--n 20016] [--d 64] [--record 24] [--C 0.01] [--seed 1]
//                        [--dir /tmp] [--repeat 3]
// URI: a postgresql:// URI of an empty schema/database without keys= (the bench adds it).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "svattn/store.h"

using namespace svattn;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Args {
  std::string pg;
  int n = 20016;
  int d = 64;
  int record = 24;
  double C = 0.01;
  std::uint64_t seed = 1;
  std::string dir = "/tmp";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--pg") a.pg = v;
    else if (k == "--n") a.n = std::stoi(v);
    else if (k == "--d") a.d = std::stoi(v);
    else if (k == "--record") a.record = std::stoi(v);
    else if (k == "--C") a.C = std::stod(v);
    else if (k == "--seed") a.seed = std::stoull(v);
    else if (k == "--dir") a.dir = v;
    else {
      std::fprintf(stderr, "bench_store_backends: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.pg.empty()) {
    std::fprintf(stderr, "bench_store_backends: --pg URI (an empty PostgreSQL schema) is required\n");
    std::exit(2);
  }
  return a;
}

RowMatrix gaussian(int n, int d, std::mt19937_64& gen) {
  RowMatrix m(n, d);
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < d; ++k) {
      const double u1 = (static_cast<double>(gen() >> 11) + 0.5) * 0x1.0p-53;
      const double u2 = static_cast<double>(gen() >> 11) * 0x1.0p-53;
      m(i, k) = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
  return m;
}

struct Times {
  double import_s = 0, open_s = 0, forget_reserve_s = 0, forget_support_s = 0, add_s = 0,
         query_s = 0;
  std::string hash;
};

// The records that hold no support token and those that do (ascending).
void classify(const State& s, std::vector<std::int64_t>& reserve_only,
              std::vector<std::int64_t>& support) {
  std::vector<std::int64_t> all, sup;
  for (std::size_t t = 0; t < s.ids.size(); ++t) {
    const std::int64_t r = s.ids[t] >> kPositionBits;
    if (all.empty() || all.back() != r) all.push_back(r);
    if (s.alpha[t] > 0 && (sup.empty() || sup.back() != r)) sup.push_back(r);
  }
  for (std::int64_t r : all)
    (std::binary_search(sup.begin(), sup.end(), r) ? support : reserve_only).push_back(r);
}

Times measure(const std::string& at, const Args& a, const RowMatrix& x,
              const std::vector<std::int64_t>& recs, const RowMatrix& one, const RowMatrix& q) {
  Times t;
  MemorySettings ms;
  ms.problem.kernel.type = KernelType::kRbf;
  ms.problem.kernel.bandwidth = std::sqrt(static_cast<double>(a.d));
  ms.problem.C = a.C;
  {
    StoreOptions o;
    o.create = true;
    Store s(at, o);
    s.create_memory("m", ms, a.d, a.d);
    const double t0 = now();
    s.import_records("m", recs, x);
    t.import_s = now() - t0;
  }
  double t0 = now();
  Store s(at);
  (void)s.memory("m");
  t.open_s = now() - t0;
  std::vector<std::int64_t> reserve_only, support;
  classify(s.memory("m").state(), reserve_only, support);
  t.forget_reserve_s = s.forget_record("m", reserve_only.at(0)).total_seconds;
  t.forget_support_s = s.forget_record("m", support.at(0)).total_seconds;
  t0 = now();
  s.add_record("m", 99999998, one);
  t.add_s = now() - t0;
  t0 = now();
  (void)s.query("m", q);
  t.query_s = now() - t0;
  t.hash = s.memory_info("m").state_sha256;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::string tmpl = a.dir + "/svattn_bench_backends_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) return 2;
  const std::string dir = buf.data();
  std::mt19937_64 gen(a.seed);
  const RowMatrix x = gaussian(a.n, a.d, gen);
  std::vector<std::int64_t> recs(a.n);
  for (int i = 0; i < a.n; ++i) recs[i] = i / a.record;
  const RowMatrix one = gaussian(a.record, a.d, gen);
  const RowMatrix q = gaussian(100, a.d, gen);
  const std::string sep = a.pg.find('?') == std::string::npos ? "?" : "&";
  const Times lite = measure(dir + "/s.db", a, x, recs, one, q);
  const Times pg = measure(a.pg + sep + "keys=" + dir + "/pg.keys", a, x, recs, one, q);
  std::printf("n = %d tokens (%d records x %d), d = %d, RBF sigma^2 = d, C = %g, encrypted\n\n", a.n,
              a.n / a.record, a.record, a.d, a.C);
  std::printf("| operation (library, seconds) | SQLite file | PostgreSQL (Unix socket) | PG / SQLite |\n"
              "| --- | --- | --- | --- |\n");
  auto row = [](const char* what, double l, double p) {
    std::printf("| %s | %.4f | %.4f | %.2f |\n", what, l, p, p / l);
  };
  row("import (all records)", lite.import_s, pg.import_s);
  row("open: first use of the memory in a new Store", lite.open_s, pg.open_s);
  row("forget reserve-only record (total)", lite.forget_reserve_s, pg.forget_reserve_s);
  row("forget support record (total)", lite.forget_support_s, pg.forget_support_s);
  row("add one record", lite.add_s, pg.add_s);
  row("query 100 rows", lite.query_s, pg.query_s);
  std::printf("\nsame final state hash on both backends: %s\n", lite.hash == pg.hash ? "yes" : "NO");
  return lite.hash == pg.hash ? 0 : 1;
}
