// The store at real size: wall time and peak RSS of every `svattn memory` command
// (process start included) beside retraining from scratch (`svattn solve`, LIBSVM's svm-train),
// measured in the same run, and the same forgets through the library on an open Store.
// Gaussian keys, one record = `record` consecutive rows. Prints Markdown tables.
//   bench_store_scale --svattn PATH [--n 20016] [--d 64] [--record 24] [--C 0.01]
//                     [--sigma2-per-dim 1] [--seed 1] [--dir /tmp] [--libsvm 1] [--plaintext 0]
//   bench_store_scale --store PATH [--forgets 10] [--support-forgets 10]  (open-Store series on an
//                     existing store's memory "m", which it changes: pass a copy; no CLI runs)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "support/random_matrix.h"
#include "svattn/batch_solver.h"
#include "svattn/io.h"
#include "svattn/store.h"

using namespace svattn;

namespace {

using svattn::bench::median;
using svattn::bench::now;

struct Args {
  std::string svattn;
  int n = 20016;
  int d = 64;
  int record = 24;
  double C = 0.01;
  double sigma2_per_dim = 1.0;
  std::uint64_t seed = 1;
  std::string dir = "/tmp";
  bool libsvm = true;
  bool plaintext = false;    // --plaintext 1: `memory create --plaintext` (default: encrypted)
  std::string store;         // --store PATH: only the open-Store series on this store
  int forgets = 10;          // reserve-only forgets in the open-Store series
  int support_forgets = -1;  // forgets of records holding support tokens (-1: as --forgets)
};

constexpr char kUsage[] =
    "bench_store_scale --svattn PATH [--n 20016] [--d 64] [--record 24] [--C 0.01] "
    "[--sigma2-per-dim 1] [--seed 1] [--dir /tmp] [--libsvm 1] [--plaintext 0]\n"
    "   or: bench_store_scale --store PATH [--forgets 10] [--support-forgets 10] (open-Store "
    "series on a copy of an existing store's memory \"m\")";

Args parse(int argc, char** argv) {
  Args a;
  bench::parse_options(argc, argv, "bench_store_scale", kUsage,
                       [&](const std::string& k, const std::string& v) {
                         if (k == "--svattn")
                           a.svattn = v;
                         else if (k == "--n")
                           a.n = std::stoi(v);
                         else if (k == "--d")
                           a.d = std::stoi(v);
                         else if (k == "--record")
                           a.record = std::stoi(v);
                         else if (k == "--C")
                           a.C = std::stod(v);
                         else if (k == "--sigma2-per-dim")
                           a.sigma2_per_dim = std::stod(v);
                         else if (k == "--seed")
                           a.seed = std::stoull(v);
                         else if (k == "--dir")
                           a.dir = v;
                         else if (k == "--libsvm")
                           a.libsvm = v != "0";
                         else if (k == "--plaintext")
                           a.plaintext = v != "0";
                         else if (k == "--store")
                           a.store = v;
                         else if (k == "--forgets")
                           a.forgets = std::stoi(v);
                         else if (k == "--support-forgets")
                           a.support_forgets = std::stoi(v);
                         else
                           return false;
                         return true;
                       });
  if (a.svattn.empty() && a.store.empty()) {
    std::fprintf(stderr, "bench_store_scale: --svattn PATH (the CLI binary) is required\n");
    std::exit(2);
  }
  return a;
}

struct Timed {
  double seconds = 0;
  long max_rss_kb = 0;
  int code = -1;
};

/// Runs `cmd` through /bin/sh (stdout/stderr to /dev/null): wall time and the child's peak RSS.
Timed run(const std::string& cmd) {
  const double t0 = now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string full = "exec " + cmd + " >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", full.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int st = 0;
  struct rusage ru {};
  ::wait4(pid, &st, 0, &ru);
  Timed t;
  t.seconds = now() - t0;
  t.max_rss_kb = ru.ru_maxrss;
  t.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return t;
}

void write_libsvm(const std::string& path, const RowMatrix& x, std::int64_t skip_lo,
                  std::int64_t skip_hi) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    if (i >= skip_lo && i < skip_hi) continue;
    std::fprintf(f, "1");
    for (Eigen::Index k = 0; k < x.cols(); ++k) std::fprintf(f, " %d:%.17g", int(k + 1), x(i, k));
    std::fprintf(f, "\n");
  }
  std::fclose(f);
}

// Records whose tokens all have alpha = 0, and records holding a support token.
void classify(const State& s, std::vector<std::int64_t>& reserve_only,
              std::vector<std::int64_t>& support) {
  std::int64_t cur = -1;
  bool has = false;
  auto flush = [&] {
    if (cur >= 0) (has ? support : reserve_only).push_back(cur);
  };
  for (std::size_t t = 0; t < s.ids.size(); ++t) {
    const std::int64_t r = record_of(s.ids[t]);
    if (r != cur) {
      flush();
      cur = r;
      has = false;
    }
    has = has || s.alpha[t] != 0;
  }
  flush();
}

void row(const char* what, const Timed& t, double retrain) {
  std::printf("| %s | %.3f | %.1f | %s | %d |\n", what, t.seconds, t.max_rss_kb / 1024.0,
              retrain > 0 ? (std::to_string(retrain / t.seconds).substr(0, 6) + "x").c_str() : "",
              t.code);
}

// One forget kind of the open-Store series: `count` forgets, each row with its breakdown, then the
// medians against the in-process retrain.
bool forget_series(Store& s, const char* kind, const std::vector<std::int64_t>& records, int count,
                   double retrain) {
  std::vector<double> total, mem, cert, commit, ckpt;
  bool ok = true;
  std::string argument;
  for (int k = 0; k < count && k < static_cast<int>(records.size()); ++k) {
    const ForgetResult f = s.forget_record("m", records[static_cast<std::size_t>(k)]);
    ok = ok && f.certificate.verify.ok();
    argument = to_string(f.certificate.verify.argument);
    total.push_back(f.total_seconds);
    mem.push_back(f.memory_seconds);
    cert.push_back(f.certificate_seconds);
    commit.push_back(f.commit_seconds);
    ckpt.push_back(f.shred_seconds + f.checkpoint_seconds);  // all of the work after the commit
  }
  std::printf("| %s (%zu) | %.4f | %.4f | %.4f | %.4f | %.4f | %.0fx | %s |\n", kind, total.size(),
              median(total), median(mem), median(cert), median(commit), median(ckpt),
              retrain / median(total), argument.c_str());
  return ok;
}

// --store: restore, retrain in process, then reserve-only and support forgets on one open Store.
int open_store_series(const Args& a) {
  Store s(a.store);
  double t0 = now();
  const State st = s.memory("m").state();
  const double open_s = now() - t0;
  std::vector<std::int64_t> reserve_only, support;
  classify(st, reserve_only, support);
  BatchSettings bs;
  bs.problem = st.settings;
  const TokenSet remaining = s.memory("m").tokens();
  t0 = now();
  (void)solve_batch(remaining, bs);
  const double retrain = now() - t0;
  std::printf(
      "n = %zu, |S u E| = %zu; restore %.3f s; retrain in-process (solve_batch) %.3f s\n\n"
      "| open Store forget | total s (median) | decrement | certificate | commit | checkpoint + "
      "key destruction | retrain / total | argument |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
      st.ids.size(), st.partition.margin.size() + st.partition.error.size(), open_s, retrain);
  // Spread the picks over the memory (every k-th record of each kind).
  auto spread = [&](const std::vector<std::int64_t>& v, int count) {
    std::vector<std::int64_t> out;
    const std::size_t step = std::max<std::size_t>(1, v.size() / std::max(1, count));
    for (std::size_t i = 0; i < v.size() && out.size() < static_cast<std::size_t>(count); i += step)
      out.push_back(v[i]);
    return out;
  };
  const int sf = a.support_forgets < 0 ? a.forgets : a.support_forgets;
  bool ok =
      forget_series(s, "reserve-only record", spread(reserve_only, a.forgets), a.forgets, retrain);
  if (sf > 0)
    ok = forget_series(s, "record holding support tokens", spread(support, sf), sf, retrain) && ok;
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  std::printf("\npeak RSS %.1f MiB\n", ru.ru_maxrss / 1024.0);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (!a.store.empty()) return open_store_series(a);
  std::string tmpl = a.dir + "/svattn_bench_scale_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) return 2;
  const std::string dir = buf.data();
  const std::string db = dir + "/s.db", keys = dir + "/k.npy", recs = dir + "/r.npy";
  support::Rng gen(a.seed);
  const RowMatrix x = support::gaussian_matrix_open(a.n, a.d, gen);
  RowMatrix r(a.n, 1);
  for (int i = 0; i < a.n; ++i) r(i, 0) = i / a.record;
  write_npy(keys, x);
  write_npy(recs, r);
  write_npy(dir + "/one.npy", support::gaussian_matrix_open(a.record, a.d, gen));
  write_npy(dir + "/q.npy", support::gaussian_matrix_open(100, a.d, gen));
  const double sigma = std::sqrt(a.sigma2_per_dim * a.d);
  char prob[128];
  std::snprintf(prob, sizeof prob, " --bandwidth %.17g --C %.17g", sigma, a.C);
  const std::string S = a.svattn + " memory ";
  const std::string M = " --memory m";

  run(S + "create " + db + M + " --dim " + std::to_string(a.d) + prob +
      (a.plaintext ? " --plaintext" : ""));
  const Timed import = run(S + "import " + db + M + " --keys " + keys + " --records " + recs);
  std::vector<std::int64_t> reserve_only, support;
  State st;
  {
    StoreOptions ro;
    ro.read_only = true;
    Store s(db, ro);
    st = s.stored_state("m");
  }
  classify(st, reserve_only, support);
  std::printf(
      "n = %d tokens (%d records x %d), d = %d, RBF sigma^2 = %.3g (= %g d), C = %g: "
      "|S| = %zu, |E| = %zu, |S u E| = %zu; %zu reserve-only records\n\n",
      a.n, a.n / a.record, a.record, a.d, sigma * sigma, a.sigma2_per_dim, a.C,
      st.partition.margin.size(), st.partition.error.size(),
      st.partition.margin.size() + st.partition.error.size(), reserve_only.size());
  if (reserve_only.size() < 2 || support.size() < 4) {
    std::fprintf(stderr, "bench_store_scale: too few reserve-only or support records\n");
    return 1;
  }
  // Retraining from scratch without one record, process included (our batch solve, LIBSVM).
  const std::int64_t rs = support[0];
  const std::string excl =
      std::to_string(rs * a.record) + "-" + std::to_string(rs * a.record + a.record - 1);
  const Timed solve = run(a.svattn + " solve --keys " + keys + " --exclude " + excl + prob);
  Timed libsvm;
  if (a.libsvm) {
    write_libsvm(dir + "/x.libsvm", x, rs * a.record, rs * a.record + a.record);
    char opt[160];
    std::snprintf(opt, sizeof opt, " -s 2 -t 2 -g %.17g -n %.17g -m 512 -q ", 1.0 / (sigma * sigma),
                  1.0 / ((a.n - a.record) * a.C));
    libsvm = run("svm-train" + std::string(opt) + dir + "/x.libsvm " + dir + "/x.model");
  }
  const double base = solve.seconds;
  std::printf(
      "| CLI command (wall, process start included) | seconds | peak RSS MiB | retrain / this "
      "| exit |\n| --- | --- | --- | --- | --- |\n");
  row("retrain: `svattn solve --exclude` (one record out)", solve, 0);
  if (a.libsvm) row("retrain: LIBSVM `svm-train -s 2` (one record out)", libsvm, 0);
  row("`memory import` (total)", import, 0);
  row("`memory show`", run(S + "show " + db + M), base);
  row("`memory query` (100 rows)", run(S + "query " + db + M + " --queries " + dir + "/q.npy"),
      base);
  row("`memory add` (one record)",
      run(S + "add " + db + M + " --record 99999999 --keys " + dir + "/one.npy"), base);
  const std::string F = S + "forget " + db + M + " --record ";
  row("`memory forget` reserve-only record (default certificate)",
      run(F + std::to_string(reserve_only[0])), base);
  row("`memory forget` support record (default certificate)", run(F + std::to_string(support[0])),
      base);
  row("`memory forget --resolve` support record",
      run(F + std::to_string(support[1]) + " --resolve"), base);
  row("`memory verify`", run(S + "verify " + db), base);
  // The same operations on an open Store (restore outside the timed region).
  Store s(db);
  double t0 = now();
  (void)s.memory("m");
  const double open_s = now() - t0;
  reserve_only.clear();  // the CLI forgets above changed the support: classify again
  support.clear();
  classify(s.memory("m").state(), reserve_only, support);
  const RestoreReport rr = s.last_restore("m");
  const ForgetResult fr = s.forget_record("m", reserve_only.at(0));
  const ForgetResult fs = s.forget_record("m", support.at(0));
  t0 = now();
  const OpResult fa =
      s.add_record("m", 99999998, support::gaussian_matrix_open(a.record, a.d, gen));
  const double add_s = now() - t0;
  const RowMatrix queries = support::gaussian_matrix_open(100, a.d, gen);
  t0 = now();
  (void)s.query("m", queries);
  const double query_s = now() - t0;
  t0 = now();
  (void)s.memory_info("m");
  const double info_s = now() - t0;
  BatchSettings bs;
  bs.problem.kernel.bandwidth = sigma;
  bs.problem.C = a.C;
  const TokenSet remaining = s.memory("m").tokens();
  t0 = now();
  (void)solve_batch(remaining, bs);
  const double retrain_lib = now() - t0;
  std::printf(
      "\n| open Store | seconds | retrain / this | certificate argument |\n| --- | --- | --- | --- "
      "|\n");
  std::printf("| retrain in-process (`solve_batch`, %d tokens) | %.3f | | |\n", remaining.size(),
              retrain_lib);
  std::printf(
      "| first use: restore the memory from the file (screening bounds %s, %ld kernel values) | "
      "%.3f | | |\n",
      rr.screening_used ? "used" : "not used", rr.kernel_evaluations, open_s);
  std::printf("| add one record (total; memory %.4f s) | %.4f | %.0fx | |\n", fa.memory_seconds,
              add_s, retrain_lib / add_s);
  std::printf("| query 100 rows (support rows read and checked) | %.4f | %.0fx | |\n", query_s,
              retrain_lib / query_s);
  std::printf("| memory_info (show) | %.4f | %.0fx | |\n", info_s, retrain_lib / info_s);
  std::printf(
      "| forget reserve-only record (total; decrement %.4f s, certificate %.4f s) | %.4f | %.0fx | "
      "%s |\n",
      fr.memory_seconds, fr.certificate_seconds, fr.total_seconds, retrain_lib / fr.total_seconds,
      to_string(fr.certificate.verify.argument).c_str());
  std::printf(
      "| forget support record (total; decrement %.4f s, certificate %.4f s) | %.4f | %.0fx | %s "
      "|\n",
      fs.memory_seconds, fs.certificate_seconds, fs.total_seconds, retrain_lib / fs.total_seconds,
      to_string(fs.certificate.verify.argument).c_str());
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  std::printf(
      "\nkeys + values: %.1f MiB (fp64); this process (the open Store, after the retrain "
      "above): peak RSS %.1f MiB\n",
      2.0 * a.n * a.d * 8 / (1024.0 * 1024.0), ru.ru_maxrss / 1024.0);
  return fr.certificate.verify.ok() && fs.certificate.verify.ok() ? 0 : 1;
}
