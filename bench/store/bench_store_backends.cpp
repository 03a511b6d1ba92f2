// The store's operations on SQLite and PostgreSQL in one run (docs/performance.md "PostgreSQL
// backend"): import, open (first use of a memory in a new Store: rows read, restored), forget of
// a reserve-only and of a support record, add, query, through the library. Gaussian keys, one
// record = `record` consecutive rows. Every store is encrypted (keys in a local key store file);
// --pg-plain / --plaintext 1 add plaintext stores (the cost of encryption), --pg-tcp the same
// server over loopback TCP; without --pg only the SQLite stores run.
//   bench_store_backends [--pg URI] [--pg-tcp URI] [--pg-plain URI] [--plaintext 0|1]
//                        [--n 20016] [--d 64] [--record 24] [--C 0.01] [--seed 1]
//                        [--dir /tmp] [--repeat 3] [--open-repeat 5] [--forget-repeat 10]
//                        [--keep 0|1]
// URI: a postgresql:// URI of an empty schema/database without keys= (the bench adds it), one per
// PostgreSQL store. --plaintext 1 adds a plaintext SQLite file. Each repeat imports into a new
// memory of the same stores, in the order SQLite, SQLite plaintext, PostgreSQL (socket), its
// plaintext store, PostgreSQL (TCP); then opens that memory --open-repeat times in each store
// (stores alternating), then forgets --forget-repeat reserve-only and as many support records in
// each (stores alternating, the same record in every store: the first record that is reserve-only
// / holds a support token in the current state). Import is a median over the repeats; open and
// forget over every open / forget of every repeat. The stores' directory under --dir is removed at
// the end unless --keep 1.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "support/random_matrix.h"
#include "svattn/store.h"

using namespace svattn;

namespace {

using svattn::bench::median;
using svattn::bench::now;

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
  int open_repeat = 5;
  int forget_repeat = 10;
  bool keep = false;
};

constexpr char kUsage[] =
    "bench_store_backends [--pg URI] [--pg-tcp URI] [--pg-plain URI] [--plaintext 0|1] "
    "[--n 20016] [--d 64] [--record 24] [--C 0.01] [--seed 1] [--dir /tmp] [--repeat 3] "
    "[--open-repeat 5] [--forget-repeat 10] [--keep 0|1] (bench/store/bench_store_backends.cpp "
    "says what each does)";

Args parse(int argc, char** argv) {
  Args a;
  bench::parse_options(argc, argv, "bench_store_backends", kUsage,
                       [&](const std::string& k, const std::string& v) {
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
                         else if (k == "--open-repeat")
                           a.open_repeat = std::max(1, std::stoi(v));
                         else if (k == "--keep")
                           a.keep = v == "1";
                         else if (k == "--forget-repeat")
                           a.forget_repeat = std::max(1, std::stoi(v));
                         else
                           return false;
                         return true;
                       });
  if (a.pg.empty() && (!a.pg_tcp.empty() || !a.pg_plain.empty())) {
    std::fprintf(stderr, "bench_store_backends: --pg-tcp / --pg-plain need --pg\n");
    std::exit(2);
  }
  return a;
}

// One store's samples: an import per repeat, opens and forgets over all repeats.
struct Times {
  std::vector<double> import_s, open_s, forget_reserve_s, forget_support_s, add_s, query_s;
  std::vector<double> forget_reserve_store_s, forget_support_store_s;  // total - decrement - cert
  std::vector<std::string> hash;                                       // per repeat
  // The support forget's store part in pieces: bounds written, COMMIT, key destruction, checkpoint.
  std::vector<double> support_screening_s, support_commit_s, support_shred_s, support_ckpt_s;
};

// The first record that holds no support token and the first that does.
void classify(const State& s, std::int64_t& reserve_only, std::int64_t& support) {
  std::vector<std::int64_t> all, sup;
  for (std::size_t t = 0; t < s.ids.size(); ++t) {
    const std::int64_t r = s.ids[t] >> kPositionBits;
    if (all.empty() || all.back() != r) all.push_back(r);
    if (s.alpha[t] > 0 && (sup.empty() || sup.back() != r)) sup.push_back(r);
  }
  reserve_only = support = -1;
  for (std::int64_t r : all) {
    const bool is_support = std::binary_search(sup.begin(), sup.end(), r);
    if (is_support && support < 0) support = r;
    if (!is_support && reserve_only < 0) reserve_only = r;
  }
  if (support < 0 || reserve_only < 0) {
    std::fprintf(stderr, "bench_store_backends: no reserve-only or no support record left\n");
    std::exit(1);
  }
}

MemorySettings settings_of(const Args& a) {
  MemorySettings ms;
  ms.problem.kernel.type = KernelType::kRbf;
  ms.problem.kernel.bandwidth = std::sqrt(static_cast<double>(a.d));
  ms.problem.C = a.C;
  return ms;
}

void measure_import(const std::string& at, bool encrypt, const std::string& mem, const Args& a,
                    const RowMatrix& x, const std::vector<std::int64_t>& recs, Times& t) {
  StoreOptions o;
  o.create = true;  // the store exists after the first repeat
  o.encrypt = encrypt;
  Store s(at, o);
  s.create_memory(mem, settings_of(a), a.d, a.d);
  const double t0 = now();
  s.import_records(mem, recs, x);
  t.import_s.push_back(now() - t0);
}

void measure_open(const std::string& at, const std::string& mem, Times& t) {
  const double t0 = now();
  Store s(at);
  (void)s.memory(mem);
  t.open_s.push_back(now() - t0);
}

void record_forget(const ForgetResult& f, std::vector<double>& total, std::vector<double>& store) {
  total.push_back(f.total_seconds);
  store.push_back(f.total_seconds - f.memory_seconds - f.certificate_seconds);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::string tmpl = a.dir + "/svattn_bench_backends_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    std::fprintf(stderr, "bench_store_backends: cannot create a directory under --dir %s: %s\n",
                 a.dir.c_str(), std::strerror(errno));
    return 2;
  }
  const std::string dir = buf.data();
  support::Rng gen(a.seed);
  const RowMatrix x = support::gaussian_matrix_open(a.n, a.d, gen);
  std::vector<std::int64_t> recs(a.n);
  for (int i = 0; i < a.n; ++i) recs[i] = i / a.record;
  const RowMatrix one = support::gaussian_matrix_open(a.record, a.d, gen);
  const RowMatrix q = support::gaussian_matrix_open(100, a.d, gen);
  // The stores of the run, in measuring order.
  struct Config {
    std::string name, at;
    bool encrypt;
    Times t;
  };
  auto pg_at = [&](const std::string& uri, const std::string& keys) {
    return uri + (uri.find('?') == std::string::npos ? "?" : "&") + "keys=" + dir + "/" + keys;
  };
  std::vector<Config> cs;
  cs.push_back({"SQLite file", dir + "/s.db", true, {}});
  if (a.plaintext) cs.push_back({"SQLite plaintext", dir + "/p.db", false, {}});
  if (!a.pg.empty()) cs.push_back({"PostgreSQL (Unix socket)", pg_at(a.pg, "pg.keys"), true, {}});
  if (!a.pg_plain.empty()) cs.push_back({"PostgreSQL plaintext (socket)", a.pg_plain, false, {}});
  if (!a.pg_tcp.empty())
    cs.push_back({"PostgreSQL (TCP 127.0.0.1)", pg_at(a.pg_tcp, "tcp.keys"), true, {}});
  for (int r = 0; r < a.repeat; ++r) {
    const std::string mem = "m" + std::to_string(r);
    for (Config& c : cs) {
      measure_import(c.at, c.encrypt, mem, a, x, recs, c.t);
      std::fprintf(stderr, "repeat %d: %s imported\n", r, c.name.c_str());
    }
    for (int k = 0; k < a.open_repeat; ++k)
      for (Config& c : cs) measure_open(c.at, mem, c.t);
    std::fprintf(stderr, "repeat %d: %d opens of each store done\n", r, a.open_repeat);
    std::vector<std::unique_ptr<Store>> open;
    for (Config& c : cs) {
      open.push_back(std::make_unique<Store>(c.at));
      (void)open.back()->memory(mem);
    }
    for (int k = 0; k < a.forget_repeat; ++k) {
      std::int64_t reserve_only = 0, support = 0;
      classify(open[0]->memory(mem).state(), reserve_only, support);
      for (std::size_t i = 0; i < cs.size(); ++i)
        record_forget(open[i]->forget_record(mem, reserve_only), cs[i].t.forget_reserve_s,
                      cs[i].t.forget_reserve_store_s);
      for (std::size_t i = 0; i < cs.size(); ++i) {
        const ForgetResult f = open[i]->forget_record(mem, support);
        Times& t = cs[i].t;
        record_forget(f, t.forget_support_s, t.forget_support_store_s);
        t.support_screening_s.push_back(f.screening_seconds);
        t.support_commit_s.push_back(f.commit_seconds);
        t.support_shred_s.push_back(f.shred_seconds);
        t.support_ckpt_s.push_back(f.checkpoint_seconds);
      }
    }
    std::fprintf(stderr, "repeat %d: %d forgets of each kind done\n", r, a.forget_repeat);
    for (std::size_t i = 0; i < cs.size(); ++i) {
      double t0 = now();
      open[i]->add_record(mem, 99999998, one);
      cs[i].t.add_s.push_back(now() - t0);
      t0 = now();
      (void)open[i]->query(mem, q);
      cs[i].t.query_s.push_back(now() - t0);
      cs[i].t.hash.push_back(open[i]->memory_info(mem).state_sha256);
    }
  }
  std::printf(
      "n = %d tokens (%d records x %d), d = %d, RBF sigma^2 = d, C = %g; medians of %d imports, "
      "%d opens, %d forgets of each kind per store (stores alternating)\n\n",
      a.n, a.n / a.record, a.record, a.d, a.C, a.repeat, a.repeat * a.open_repeat,
      a.repeat * a.forget_repeat);
  using Samples = std::vector<double> Times::*;
  auto med = [&](const Config& c, Samples f) { return median(c.t.*f); };
  std::printf("| operation (library, seconds) |");
  for (const Config& c : cs) std::printf(" %s |", c.name.c_str());
  for (std::size_t i = 1; i < cs.size(); ++i) std::printf(" %s / SQLite |", cs[i].name.c_str());
  std::printf("\n| --- |");
  for (std::size_t i = 0; i < 2 * cs.size() - 1; ++i) std::printf(" --- |");
  std::printf("\n");
  auto row = [&](const char* what, Samples f) {
    std::printf("| %s |", what);
    for (const Config& c : cs) std::printf(" %.4f |", med(c, f));
    for (std::size_t i = 1; i < cs.size(); ++i)
      std::printf(" %.2f |", med(cs[i], f) / med(cs[0], f));
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
  row("forget support record: screening bounds written", &Times::support_screening_s);
  row("forget support record: COMMIT", &Times::support_commit_s);
  row("forget support record: data key destroyed (after the commit)", &Times::support_shred_s);
  row("forget support record: WAL checkpoint (after the commit)", &Times::support_ckpt_s);
  row("add one record", &Times::add_s);
  row("query 100 rows", &Times::query_s);
  // The cost of encryption: encrypted / plaintext on the same backend, and the forget difference.
  // Paired by round (the two stores of a pair are measured one after the other): the median of
  // the per-round ratios (import, open) or differences (forgets), with the quartiles, so that a
  // drift of the machine between rounds does not enter the comparison.
  auto paired = [&](const Config& e, const Config& p, Samples f, bool ratio) {
    const std::vector<double>&ev = e.t.*f, &pv = p.t.*f;
    std::vector<double> d;
    for (std::size_t i = 0; i < std::min(ev.size(), pv.size()); ++i)
      d.push_back(ratio ? 100 * (ev[i] / pv[i] - 1) : 1000 * (ev[i] - pv[i]));
    std::sort(d.begin(), d.end());
    char cell[96];
    std::snprintf(cell, sizeof cell, "%+.1f %s [%+.1f, %+.1f]", median(d), ratio ? "%" : "ms",
                  d[d.size() / 4], d[(3 * d.size()) / 4]);
    return std::string(cell);
  };
  auto enc_row = [&](const Config& e, const Config& p) {
    std::printf("| %s | %s | %s | %s | %s | %s |\n", e.name.c_str(),
                paired(e, p, &Times::import_s, true).c_str(),
                paired(e, p, &Times::open_s, true).c_str(),
                paired(e, p, &Times::forget_reserve_s, false).c_str(),
                paired(e, p, &Times::forget_support_s, false).c_str(),
                paired(e, p, &Times::forget_support_store_s, false).c_str());
  };
  const Config* lite_plain = nullptr;
  const Config* pg_plain = nullptr;
  const Config* pg_sock = nullptr;
  for (const Config& c : cs) {
    if (c.name == "SQLite plaintext") lite_plain = &c;
    if (c.name == "PostgreSQL plaintext (socket)") pg_plain = &c;
    if (c.name == "PostgreSQL (Unix socket)") pg_sock = &c;
  }
  if (lite_plain != nullptr || (pg_plain != nullptr && pg_sock != nullptr)) {
    std::printf(
        "\n| encrypted against plaintext (paired by round: median [quartiles]) | import | open | "
        "forget reserve-only | forget support | forget support: store part |\n"
        "| --- | --- | --- | --- | --- | --- |\n");
    if (lite_plain != nullptr) enc_row(cs[0], *lite_plain);
    if (pg_plain != nullptr && pg_sock != nullptr) enc_row(*pg_sock, *pg_plain);
    std::printf(
        "\n| support forget's store part, encrypted - plaintext (paired: median [quartiles]) | "
        "screening bounds | COMMIT | key destroyed | checkpoint |\n"
        "| --- | --- | --- | --- | --- |\n");
    auto part_row = [&](const Config& e, const Config& p) {
      std::printf("| %s | %s | %s | %s | %s |\n", e.name.c_str(),
                  paired(e, p, &Times::support_screening_s, false).c_str(),
                  paired(e, p, &Times::support_commit_s, false).c_str(),
                  paired(e, p, &Times::support_shred_s, false).c_str(),
                  paired(e, p, &Times::support_ckpt_s, false).c_str());
    };
    if (lite_plain != nullptr) part_row(cs[0], *lite_plain);
    if (pg_plain != nullptr && pg_sock != nullptr) part_row(*pg_sock, *pg_plain);
  }
  bool same = true;
  for (int r = 0; r < a.repeat; ++r)
    for (const Config& c : cs) same = same && c.t.hash[r] == cs[0].t.hash[r];
  std::printf("\nsame final state hashes on every store: %s\n", same ? "yes" : "NO");
  if (!a.keep) std::filesystem::remove_all(dir);
  return same ? 0 : 1;
}
