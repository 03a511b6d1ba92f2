// The store's operations on SQLite and PostgreSQL in one run (docs/performance.md "PostgreSQL
// backend"): import, open (first use of a memory in a new Store: rows read, restored), forget of
// a reserve-only and of a support record, add, query, through the library. Gaussian keys, one
// record = `record` consecutive rows, encrypted stores (keys in a local key store file).
//   bench_store_backends --pg URI [--n 20016] [--d 64] [--record 24] [--C 0.01] [--seed 1]
//                        [--dir /tmp] [--repeat 3]
// URI: a postgresql:// URI of an empty schema/database without keys= (the bench adds it). Each
// repeat imports into a new memory of the same two stores, SQLite then PostgreSQL; the tables give
// medians over the repeats.
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
  int repeat = 3;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--pg")
      a.pg = v;
    else if (k == "--n")
      a.n = std::stoi(v);
    else if (k == "--d")
      a.d = std::stoi(v);
    else if (k == "--record")
      a.record = std::stoi(v);
    else if (k == "--C")
      a.C = std::stod(v);
    else if (k == "--seed")
      a.seed = std::stoull(v);
    else if (k == "--dir")
      a.dir = v;
    else if (k == "--repeat")
      a.repeat = std::max(1, std::stoi(v));
    else {
      std::fprintf(stderr, "bench_store_backends: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.pg.empty()) {
    std::fprintf(stderr,
                 "bench_store_backends: --pg URI (an empty PostgreSQL schema) is required\n");
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
  double forget_reserve_store_s = 0, forget_support_store_s = 0;  // total - decrement - certificate
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

Times measure(const std::string& at, const std::string& mem, const Args& a, const RowMatrix& x,
              const std::vector<std::int64_t>& recs, const RowMatrix& one, const RowMatrix& q) {
  Times t;
  MemorySettings ms;
  ms.problem.kernel.type = KernelType::kRbf;
  ms.problem.kernel.bandwidth = std::sqrt(static_cast<double>(a.d));
  ms.problem.C = a.C;
  {
    StoreOptions o;
    o.create = true;  // the store exists after the first repeat
    Store s(at, o);
    s.create_memory(mem, ms, a.d, a.d);
    const double t0 = now();
    s.import_records(mem, recs, x);
    t.import_s = now() - t0;
  }
  double t0 = now();
  Store s(at);
  (void)s.memory(mem);
  t.open_s = now() - t0;
  std::vector<std::int64_t> reserve_only, support;
  classify(s.memory(mem).state(), reserve_only, support);
  const ForgetResult fr = s.forget_record(mem, reserve_only.at(0));
  const ForgetResult fs = s.forget_record(mem, support.at(0));
  t.forget_reserve_s = fr.total_seconds;
  t.forget_support_s = fs.total_seconds;
  t.forget_reserve_store_s = fr.total_seconds - fr.memory_seconds - fr.certificate_seconds;
  t.forget_support_store_s = fs.total_seconds - fs.memory_seconds - fs.certificate_seconds;
  t0 = now();
  s.add_record(mem, 99999998, one);
  t.add_s = now() - t0;
  t0 = now();
  (void)s.query(mem, q);
  t.query_s = now() - t0;
  t.hash = s.memory_info(mem).state_sha256;
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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
  std::vector<Times> lite, pg;
  for (int r = 0; r < a.repeat; ++r) {
    const std::string mem = "m" + std::to_string(r);
    lite.push_back(measure(dir + "/s.db", mem, a, x, recs, one, q));
    pg.push_back(measure(a.pg + sep + "keys=" + dir + "/pg.keys", mem, a, x, recs, one, q));
  }
  std::printf(
      "n = %d tokens (%d records x %d), d = %d, RBF sigma^2 = d, C = %g, encrypted; medians of %d "
      "repeats (SQLite, PostgreSQL alternating)\n\n",
      a.n, a.n / a.record, a.record, a.d, a.C, a.repeat);
  std::printf(
      "| operation (library, seconds) | SQLite file | PostgreSQL (Unix socket) | PG / SQLite |\n"
      "| --- | --- | --- | --- |\n");
  auto row = [&](const char* what, double Times::*f) {
    std::vector<double> l, p;
    for (const Times& t : lite) l.push_back(t.*f);
    for (const Times& t : pg) p.push_back(t.*f);
    std::printf("| %s | %.4f | %.4f | %.2f |\n", what, median(l), median(p), median(p) / median(l));
  };
  row("import (all records)", &Times::import_s);
  row("open: first use of the memory in a new Store", &Times::open_s);
  row("forget reserve-only record (total)", &Times::forget_reserve_s);
  row("forget support record (total)", &Times::forget_support_s);
  row("forget reserve-only record: store part (total - decrement - certificate)",
      &Times::forget_reserve_store_s);
  row("forget support record: store part (total - decrement - certificate)",
      &Times::forget_support_store_s);
  row("add one record", &Times::add_s);
  row("query 100 rows", &Times::query_s);
  bool same = true;
  for (int r = 0; r < a.repeat; ++r) same = same && lite[r].hash == pg[r].hash;
  std::printf("\nsame final state hashes on both backends: %s\n", same ? "yes" : "NO");
  return same ? 0 : 1;
}
