// The path users take (docs/performance.md "The user's path"): a memory that grows by add (a
// stream in chunks of 1, 24 or 64 tokens), then records leave by remove_batch and margin tokens by
// remove, each against retraining on what is left, in the same run; beside the same removals from a
// memory built by solve_batch + Memory::restore. Public API only. Prints Markdown tables.
//   bench_ingest [--n 20000] [--d 64] [--sigma2-per-dim 1] [--C 0.01] [--chunks 1,24,64]
//                [--removal-chunk 24] [--margin-tokens 10] [--records 2] [--reps 1] [--seed 42]
//                [--stream gaussian|clustered] [--ridge 1e-6]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.h"
#include "support/random_libstdcxx.h"
#include "svattn/batch_solver.h"
#include "svattn/memory.h"

using namespace svattn;

namespace {

struct Config {
  bench::BenchProblem p;
  std::string stream = "gaussian";
  double ridge = ProblemSettings{}.ridge;
  ProblemSettings settings() const {
    ProblemSettings s = p.settings();
    s.ridge = ridge;
    return s;
  }
  int n = 20000, margin_tokens = 10, records = 2, reps = 1, removal_chunk = 24;
  std::vector<int> chunks;
};

// CPU seconds of this process (the benches run one thread): under other load, wall times of the
// same work vary by 2x between runs; CPU times much less.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

TokenSet rows(const RowMatrix& x, const std::vector<TokenId>& ids) {
  TokenSet t;
  t.keys.resize(static_cast<int>(ids.size()), x.cols());
  for (std::size_t r = 0; r < ids.size(); ++r) {
    t.ids.push_back(ids[r]);
    t.keys.row(static_cast<int>(r)) = x.row(static_cast<int>(ids[r]));
  }
  t.values = t.keys;
  return t;
}

std::vector<TokenId> range(int first, int count) {
  std::vector<TokenId> v;
  for (int i = first; i < first + count; ++i) v.push_back(i);
  return v;
}

// Gaussian keys N(0, I_d) (bench_keys), or 5 clusters: centres 4 N(0, I_d), spread 0.3.
RowMatrix make_keys(const Config& c) {
  if (c.stream == "gaussian") return bench::bench_keys(c.n, c.p);
  support::Rng rng(c.p.seed);
  support::libstdcxx::Normal N;
  RowMatrix centre(5, c.p.d), x(c.n, c.p.d);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < c.p.d; ++j) centre(i, j) = 4.0 * N(rng);
  for (int i = 0; i < c.n; ++i) {
    const int which = static_cast<int>(rng.next() % 5);
    for (int j = 0; j < c.p.d; ++j) x(i, j) = centre(which, j) + 0.3 * N(rng);
  }
  return x;
}

double retrain_seconds(const RowMatrix& x, int n, const std::vector<TokenId>& removed,
                       const Config& c) {
  std::vector<TokenId> keep;
  for (int i = 0; i < n; ++i)
    if (std::find(removed.begin(), removed.end(), i) == removed.end()) keep.push_back(i);
  const TokenSet t = rows(x, keep);
  BatchSettings bs;
  bs.problem = c.settings();
  std::vector<double> cpu;
  for (int r = 0; r < c.reps; ++r) {
    const double c0 = cpu_seconds();
    solve_batch(t, bs);
    cpu.push_back(cpu_seconds() - c0);
  }
  return bench::median(cpu);
}

// Ingest by add in chunks; returns the memory (for the removals when chunk == removal_chunk).
Memory ingest(const RowMatrix& x, int chunk, const Config& c, const std::string& batch_sha,
              double batch_s) {
  MemorySettings ms;
  ms.problem = c.settings();
  Memory m(ms, c.p.d, c.p.d);
  std::vector<double> per_add;
  OpDiagnostics tot;
  const double t0 = bench::now(), c0 = cpu_seconds();
  for (int r = 0; r < c.n; r += chunk) {
    const OpDiagnostics d = m.add_batch(rows(x, range(r, std::min(chunk, c.n - r))));
    per_add.push_back(d.seconds);
    tot += d;
  }
  const double total = bench::now() - t0, cpu = cpu_seconds() - c0;
  std::sort(per_add.begin(), per_add.end());
  std::printf(
      "| %d | %d | %.3f | %.3f | %.0f | %.3f / %.3f | %ld | %ld | %ld | %s | %.3f | %.1fx |\n",
      chunk, c.n, total, cpu, c.n / total, 1e3 * bench::median(per_add), 1e3 * per_add.back(),
      tot.events, tot.tracked, tot.batch_fallbacks, m.state_sha256() == batch_sha ? "yes" : "NO",
      batch_s, total / batch_s);
  std::fflush(stdout);
  return m;
}

// A record of `chunk` ids: `support` support tokens spread over S u E, the rest reserve tokens.
std::vector<TokenId> record_with(const State& st, int support, int chunk, int which) {
  std::vector<TokenId> sup = st.partition.margin;
  sup.insert(sup.end(), st.partition.error.begin(), st.partition.error.end());
  std::vector<TokenId> rec;
  for (int k = 0; k < support; ++k)
    rec.push_back(sup[(static_cast<std::size_t>(k) * sup.size() / 3 + which * 7 + 1) % sup.size()]);
  const auto& res = st.partition.reserve;
  for (std::size_t k = static_cast<std::size_t>(which) * 101;
       rec.size() < static_cast<std::size_t>(chunk); k += res.size() / chunk)
    rec.push_back(res[k % res.size()]);
  return rec;
}

struct Removals {
  std::vector<double> seconds, cpu, tracked;
  bool hash_back = true;
};

// Timed remove_batch(ids), then the tokens come back by add_batch (untimed); the hash must too.
void remove_and_readd(Memory& m, const RowMatrix& x, const std::vector<TokenId>& ids, Removals& r) {
  const std::string sha = m.state_sha256();
  const double c0 = cpu_seconds();
  const OpDiagnostics d = m.remove_batch(ids);
  r.cpu.push_back(cpu_seconds() - c0);
  r.seconds.push_back(d.seconds);
  r.tracked.push_back(static_cast<double>(d.tracked));
  std::vector<TokenId> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  m.add_batch(rows(x, sorted));
  r.hash_back = r.hash_back && m.state_sha256() == sha;
}

void removal_rows(const char* path, Memory& m, const RowMatrix& x, const Config& c, double retrain1,
                  const std::vector<double>& retrain_rec) {
  const State st = m.state();
  const auto& margin = st.partition.margin;
  Removals mr;
  const int count = std::min<int>(c.margin_tokens, static_cast<int>(margin.size()));
  for (int k = 0; k < count; ++k)
    remove_and_readd(m, x, {margin[static_cast<std::size_t>(k) * margin.size() / count]}, mr);
  if (count > 0) {
    const double med = bench::median(mr.seconds), cmed = bench::median(mr.cpu);
    std::printf("| %s | margin token | %d | %.2f / %.2f | %.2f | %.0f | %.3f | %.0fx | %s |\n",
                path, count, 1e3 * med,
                1e3 * *std::max_element(mr.seconds.begin(), mr.seconds.end()), 1e3 * cmed,
                bench::median(mr.tracked), retrain1, retrain1 / cmed, mr.hash_back ? "yes" : "NO");
  }
  for (int s = 0; s < 3 && c.records > 0; ++s) {
    const int support = s == 0 ? 0 : s == 1 ? 1 : 3;
    Removals rr;
    for (int k = 0; k < c.records; ++k)
      remove_and_readd(m, x, record_with(st, support, c.removal_chunk, k), rr);
    const double rmed = bench::median(rr.seconds), rcpu = bench::median(rr.cpu);
    std::printf(
        "| %s | %d-token record, %d support | %d | %.2f / %.2f | %.2f | %.0f | %.3f | %.0fx | "
        "%s |\n",
        path, c.removal_chunk, support, c.records, 1e3 * rmed,
        1e3 * *std::max_element(rr.seconds.begin(), rr.seconds.end()), 1e3 * rcpu,
        bench::median(rr.tracked), retrain_rec[s], retrain_rec[s] / rcpu,
        rr.hash_back ? "yes" : "NO");
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv);
  Config c;
  c.n = static_cast<int>(args.num("n", 20000));
  c.p.d = static_cast<int>(args.num("d", 64));
  c.p.sigma2_per_dim = args.num("sigma2-per-dim", 1.0);
  c.p.C = args.num("C", 0.01);
  c.p.seed = static_cast<std::uint64_t>(args.num("seed", 42));
  c.stream = args.get("stream", "gaussian");
  c.ridge = args.num("ridge", c.ridge);
  c.chunks = args.ints("chunks", "1,24,64");
  c.removal_chunk = static_cast<int>(args.num("removal-chunk", 24));
  c.margin_tokens = static_cast<int>(args.num("margin-tokens", 10));
  c.records = static_cast<int>(args.num("records", 2));
  c.reps = static_cast<int>(args.num("reps", 1));
  args.check();
  if (c.stream != "gaussian" && c.stream != "clustered") {
    std::fprintf(stderr, "--stream must be gaussian or clustered (got '%s')\n", c.stream.c_str());
    return 2;
  }

  const RowMatrix x = make_keys(c);
  const TokenSet all = rows(x, range(0, c.n));
  BatchSettings bs;
  bs.problem = c.settings();
  State batch_state;
  const double batch_s =
      bench::median_time(c.reps, [&] { batch_state = solve_batch(all, bs).state; });
  std::printf(
      "### Stream ingest by add: %s keys, n = %d, d = %d, RBF sigma^2 = %g d, C = %g, "
      "ridge = %g\n\n",
      c.stream.c_str(), c.n, c.p.d, c.p.sigma2_per_dim, c.p.C, c.settings().ridge);
  std::printf(
      "| chunk | n | add, all chunks (s) | CPU (s) | tokens/s | per add median / max (ms) | events "
      "| "
      "gradients recomputed | batch fallbacks | hash = batch | batch solve of n (s) | add / "
      "batch |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n");
  Memory built(MemorySettings{}, 1, 1);
  bool have_built = false;
  for (int chunk : c.chunks) {
    Memory m = ingest(x, chunk, c, batch_state.state_sha256, batch_s);
    if (chunk == c.removal_chunk) {
      built = std::move(m);
      have_built = true;
    }
  }
  if (!have_built) return 0;

  // Retraining on what is left after each removal kind, timed once per kind in this run.
  const State st = built.state();
  const double retrain1 = retrain_seconds(x, c.n, {st.partition.margin.front()}, c);
  std::vector<double> retrain_rec;
  for (int support : {0, 1, 3})
    retrain_rec.push_back(retrain_seconds(x, c.n, record_with(st, support, c.removal_chunk, 0), c));
  std::printf(
      "\n### Removal after the build: by add (chunks of %d) and by solve_batch + restore\n\n",
      c.removal_chunk);
  std::printf(
      "| memory built by | removal | count | median / max (ms) | CPU median (ms) | "
      "gradients recomputed (median) | retrain CPU (s) | retrain / removal (CPU) | hash back after "
      "re-add |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  removal_rows("add", built, x, c, retrain1, retrain_rec);
  MemorySettings ms;
  ms.problem = c.settings();
  Memory restored = Memory::restore(ms, all, batch_state);
  removal_rows("restore", restored, x, c, retrain1, retrain_rec);
  return 0;
}
