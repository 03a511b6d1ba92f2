// The store's operations on SQLite and PostgreSQL in one run (docs/performance.md "PostgreSQL
// backend"): import, open (first use of a memory in a new Store: rows read, restored), forget of
// a reserve-only and of a support record, add, query, through the library. Gaussian keys, one
// record = `record` consecutive rows. Every store is encrypted (keys in a local key store file);
// --pg-plain / --plaintext 1 add plaintext stores (the cost of encryption), --pg-tcp the same
// server over loopback TCP.
//   bench_store_backends --pg URI [--pg-tcp URI] [--pg-plain URI] [--plaintext 0|1]
//                        [--n 20016] [--d 64] [--record 24] [--C 0.01] [--seed 1]
//                        [--dir /tmp] [--repeat 3]
// URI: a postgresql:// URI of an empty schema/database without keys= (the bench adds it), one per
// PostgreSQL store. --plaintext 1 adds a plaintext SQLite file. Each repeat imports into a new
// memory of the same stores, in the order SQLite, SQLite plaintext, PostgreSQL (socket), its
// plaintext store, PostgreSQL (TCP); the tables give medians over the repeats.
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
  std::string pg, pg_tcp, pg_plain;
  bool plaintext = false;
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
    else if (k == "--pg-tcp")
      a.pg_tcp = v;
    else if (k == "--pg-plain")
      a.pg_plain = v;
    else if (k == "--plaintext")
      a.plaintext = v == "1";
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

Times measure(const std::string& at, bool encrypt, const std::string& mem, const Args& a,
              const RowMatrix& x, const std::vector<std::int64_t>& recs, const RowMatrix& one,
              const RowMatrix& q) {
  Times t;
  MemorySettings ms;
  ms.problem.kernel.type = KernelType::kRbf;
  ms.problem.kernel.bandwidth = std::sqrt(static_cast<double>(a.d));
  ms.problem.C = a.C;
  {
    StoreOptions o;
    o.create = true;  // the store exists after the first repeat
    o.encrypt = encrypt;
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
  // The stores of the run, in measuring order.
  struct Config {
    std::string name, at;
    bool encrypt;
    std::vector<Times> t;
  };
  auto pg_at = [&](const std::string& uri, const std::string& keys) {
    return uri + (uri.find('?') == std::string::npos ? "?" : "&") + "keys=" + dir + "/" + keys;
  };
  std::vector<Config> cs;
  cs.push_back({"SQLite file", dir + "/s.db", true, {}});
  if (a.plaintext) cs.push_back({"SQLite plaintext", dir + "/p.db", false, {}});
  cs.push_back({"PostgreSQL (Unix socket)", pg_at(a.pg, "pg.keys"), true, {}});
  if (!a.pg_plain.empty()) cs.push_back({"PostgreSQL plaintext (socket)", a.pg_plain, false, {}});
  if (!a.pg_tcp.empty())
    cs.push_back({"PostgreSQL (TCP 127.0.0.1)", pg_at(a.pg_tcp, "tcp.keys"), true, {}});
  for (int r = 0; r < a.repeat; ++r) {
    const std::string mem = "m" + std::to_string(r);
    for (Config& c : cs) {
      c.t.push_back(measure(c.at, c.encrypt, mem, a, x, recs, one, q));
      std::fprintf(stderr, "repeat %d: %s done\n", r, c.name.c_str());
    }
  }
  std::printf(
      "n = %d tokens (%d records x %d), d = %d, RBF sigma^2 = d, C = %g; medians of %d "
      "repeats (stores alternating)\n\n",
      a.n, a.n / a.record, a.record, a.d, a.C, a.repeat);
  auto med = [&](const Config& c, double Times::*f) {
    std::vector<double> v;
    for (const Times& t : c.t) v.push_back(t.*f);
    return median(v);
  };
  std::printf("| operation (library, seconds) |");
  for (const Config& c : cs) std::printf(" %s |", c.name.c_str());
  for (std::size_t i = 1; i < cs.size(); ++i) std::printf(" %s / SQLite |", cs[i].name.c_str());
  std::printf("\n| --- |");
  for (std::size_t i = 0; i < 2 * cs.size() - 1; ++i) std::printf(" --- |");
  std::printf("\n");
  auto row = [&](const char* what, double Times::*f) {
    std::printf("| %s |", what);
    for (const Config& c : cs) std::printf(" %.4f |", med(c, f));
    for (std::size_t i = 1; i < cs.size(); ++i) std::printf(" %.2f |", med(cs[i], f) / med(cs[0], f));
    std::printf("\n");
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
  // The cost of encryption: encrypted / plaintext on the same backend, and the forget difference.
  auto enc_row = [&](const Config& e, const Config& p) {
    std::printf(
        "| %s | %+.1f %% | %+.1f %% | %+.1f ms | %+.1f ms |\n", e.name.c_str(),
        100 * (med(e, &Times::import_s) / med(p, &Times::import_s) - 1),
        100 * (med(e, &Times::open_s) / med(p, &Times::open_s) - 1),
        1000 * (med(e, &Times::forget_reserve_s) - med(p, &Times::forget_reserve_s)),
        1000 * (med(e, &Times::forget_support_s) - med(p, &Times::forget_support_s)));
  };
  const Config* lite_plain = nullptr;
  const Config* pg_plain = nullptr;
  const Config* pg_sock = nullptr;
  for (const Config& c : cs) {
    if (c.name == "SQLite plaintext") lite_plain = &c;
    if (c.name == "PostgreSQL plaintext (socket)") pg_plain = &c;
    if (c.name == "PostgreSQL (Unix socket)") pg_sock = &c;
  }
  if (lite_plain != nullptr || pg_plain != nullptr) {
    std::printf(
        "\n| encrypted against plaintext | import | open | forget reserve-only | forget support |\n"
        "| --- | --- | --- | --- | --- |\n");
    if (lite_plain != nullptr) enc_row(cs[0], *lite_plain);
    if (pg_plain != nullptr) enc_row(*pg_sock, *pg_plain);
  }
  bool same = true;
  for (int r = 0; r < a.repeat; ++r)
    for (const Config& c : cs) same = same && c.t[r].hash == cs[0].t[r].hash;
  std::printf("\nsame final state hashes on every store: %s\n", same ? "yes" : "NO");
  return same ? 0 : 1;
}
