// Exact removal at scale: per n, the worst case (a margin token), a 24-token record
// holding support tokens, a uniformly random token, retraining (ours and LIBSVM eps 1e-3) and the
// fitted log-log exponent of each cost in n. The memory is built by a batch solve and
// Memory::restore (streaming 200k tokens in would dominate the run). Every removal is undone by
// re-adding the tokens, and the state hash must come back each time.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.h"
#include "support/random_libstdcxx.h"
#include "svattn/batch_solver.h"
#include "svattn/memory.h"

namespace svattn::bench {

/// Gaussian keys N(0, I_d), or 5 clusters (centres 4 N(0, I_d), spread 0.3).
inline RowMatrix scaling_keys(int n, const BenchProblem& p, bool clustered) {
  if (!clustered) return bench_keys(n, p);
  support::Rng rng(p.seed + 1000);
  const int k = 5;
  RowMatrix centres = support::gaussian_matrix(k, p.d, rng) * 4.0;
  RowMatrix x(n, p.d);
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng.uniform() * k) % k;
    for (int j = 0; j < p.d; ++j) x(i, j) = centres(c, j) + 0.3 * rng.normal();
  }
  return x;
}

/// Heap bytes in use including mmap'd blocks (mallinfo2's uordblks alone misses every allocation
/// above the mmap threshold, e.g. the column cache).
inline std::size_t heap_with_mmap() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

struct ScalingRow {
  std::string stream;
  int n = 0;
  double C = 0;
  std::size_t margin = 0, error = 0;
  double build_seconds = 0;            // batch solve the memory is restored from
  std::vector<double> margin_seconds;  // one per margin-token removal
  double margin_tracked = 0;           // reserve gradients recomputed per margin removal
  double margin_kernel_values = 0;     // per margin removal
  double margin_canonical = 0;         // seconds in the canonical refinement per removal
  std::vector<double> record_seconds;  // one per 24-token record
  int record_support = 0;              // support tokens per record (min over records)
  double random_mean = 0;
  int random_count = 0;
  int mismatches = 0;  // re-adds that did not restore the hash
  double retrain_ours = 0, retrain_lib3 = 0;
  double heap_per_token = 0;
};

inline ScalingRow scaling_row(const std::string& stream, int n, const BenchProblem& p,
                              bool clustered, int margin_tokens, int records, int random_tokens,
                              int reps) {
  ScalingRow row;
  row.stream = stream;
  row.n = n;
  row.C = p.C;
  const RowMatrix keys = scaling_keys(n, p, clustered);
  const TokenSet tokens = TokenSet::from_rows(keys);
  BatchSettings bs;
  bs.problem = p.settings();
  State state;
  row.build_seconds = time_once([&] { state = solve_batch(tokens, bs).state; });
  row.margin = state.partition.margin.size();
  row.error = state.partition.error.size();
  MemorySettings ms;
  ms.problem = p.settings();
  const std::size_t heap0 = heap_with_mmap();
  Memory memory = Memory::restore(ms, tokens, state);
  row.heap_per_token = static_cast<double>(heap_with_mmap() - heap0) / n;
  const std::string sha = memory.state_sha256();
  if (sha != state.state_sha256) {
    std::fprintf(stderr, "restore changed the state at n = %d\n", n);
    std::exit(1);
  }
  auto readd = [&](const std::vector<TokenId>& ids) {
    TokenSet t;  // ids are row numbers (TokenSet::from_rows)
    t.ids = ids;
    t.keys.resize(static_cast<Eigen::Index>(ids.size()), keys.cols());
    for (std::size_t r = 0; r < ids.size(); ++r) t.keys.row(r) = keys.row(ids[r]);
    t.values = t.keys;
    memory.add_batch(t);
    if (memory.state_sha256() != sha) ++row.mismatches;
  };

  // Margin tokens spread over the margin set: remove (timed), re-add.
  const auto& margin = state.partition.margin;
  const int count = std::min<int>(margin_tokens, static_cast<int>(margin.size()));
  for (int k = 0; k < count; ++k) {
    const TokenId id = margin[static_cast<std::size_t>(k) * margin.size() / count];
    const OpDiagnostics d = memory.remove(id);
    row.margin_seconds.push_back(d.seconds);
    row.margin_tracked += static_cast<double>(d.tracked) / count;
    row.margin_kernel_values += static_cast<double>(d.kernel_evaluations) / count;
    row.margin_canonical += d.canonical_seconds / count;
    readd({id});
  }

  // Records of 24 tokens: 3 margin tokens and 21 uniformly drawn others, removed in one
  // remove_batch (timed) and re-added.
  support::Rng rng(p.seed + 11);
  auto pick = [n](support::Rng& g) { return support::libstdcxx::uniform_int(g, 0, n - 1); };
  row.record_support = 24;
  for (int r = 0; r < records && margin.size() >= 3; ++r) {
    std::vector<TokenId> rec;
    for (int k = 0; k < 3; ++k)
      rec.push_back(margin[(static_cast<std::size_t>(r) * 3 + k) * 7919 % margin.size()]);
    while (rec.size() < 24) {
      const TokenId id = pick(rng);
      if (std::find(rec.begin(), rec.end(), id) == rec.end()) rec.push_back(id);
    }
    int sup = 0;
    for (TokenId id : rec) sup += memory.alpha(id) > 0 ? 1 : 0;
    row.record_support = std::min(row.record_support, sup);
    const OpDiagnostics d = memory.remove_batch(rec);
    row.record_seconds.push_back(d.seconds);
    std::sort(rec.begin(), rec.end());
    readd(rec);
  }

  // Uniformly random tokens (with replacement): remove (timed), re-add.
  double sum = 0;
  for (int k = 0; k < random_tokens; ++k) {
    const TokenId id = pick(rng);
    sum += memory.remove(id).seconds;
    readd({id});
  }
  row.random_count = random_tokens;
  row.random_mean = random_tokens > 0 ? sum / random_tokens : 0;

  // Retraining without the first margin token.
  const TokenSet rest = tokens.without({margin.empty() ? TokenId{0} : margin[0]});
  row.retrain_ours = median_time(reps, [&] { solve_batch(rest, bs); });
  LibsvmData data(rest.keys);
  row.retrain_lib3 = median_time(reps, [&] { data.train(n - 1, p.sigma(), p.C, 1e-3, 1024); });
  return row;
}

/// Least-squares slope of log y against log n.
inline double loglog_slope(const std::vector<double>& n, const std::vector<double>& y) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double k = static_cast<double>(n.size());
  for (std::size_t i = 0; i < n.size(); ++i) {
    const double lx = std::log(n[i]), ly = std::log(y[i]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  const double den = k * sxx - sx * sx;
  return den > 0 ? (k * sxy - sx * sy) / den : 0.0;
}

inline void print_scaling(const std::vector<ScalingRow>& rows) {
  std::printf(
      "| stream | n | C | \\|S\\| / \\|E\\| | margin removal median / p95 / max (ms) | "
      "gradients recomputed / margin removal | kernel values / margin removal | canonical "
      "refinement (ms) | 24-token record median / max (ms) | random token mean (ms) | retrain "
      "ours (s) | retrain LIBSVM 1e-3 (s) | LIBSVM / margin median | LIBSVM / record median | "
      "LIBSVM / random mean | hash restored | heap bytes/token |\n");
  std::printf(
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const ScalingRow& r : rows) {
    const double mmed = median(r.margin_seconds), rmed = median(r.record_seconds);
    const int readds =
        static_cast<int>(r.margin_seconds.size() + r.record_seconds.size()) + r.random_count;
    std::printf(
        "| %s | %d | %g | %zu / %zu | %.3f / %.3f / %.3f | %.0f | %.0f | %.3f | %.3f / %.3f "
        "(>= %d support) | %.4f | %.3f | %.3f | %.0fx | %.0fx | %.0fx | %d/%d | %.0f |\n",
        r.stream.c_str(), r.n, r.C, r.margin, r.error, 1e3 * mmed,
        1e3 * percentile(r.margin_seconds, 0.95), 1e3 * percentile(r.margin_seconds, 1.0),
        r.margin_tracked, r.margin_kernel_values, 1e3 * r.margin_canonical, 1e3 * rmed,
        1e3 * percentile(r.record_seconds, 1.0), r.record_support, 1e3 * r.random_mean,
        r.retrain_ours, r.retrain_lib3, r.retrain_lib3 / mmed, r.retrain_lib3 / rmed,
        r.retrain_lib3 / r.random_mean, readds - r.mismatches, readds, r.heap_per_token);
  }
  std::fflush(stdout);
}

/// Exponents over the rows of one stream: least squares over every n, and the two-point slope
/// between the n closest to 20k and the largest n.
inline void print_exponents(const std::vector<ScalingRow>& all, const std::string& stream) {
  std::vector<const ScalingRow*> rows;
  for (const ScalingRow& r : all)
    if (r.stream == stream) rows.push_back(&r);
  if (rows.size() < 2) return;
  std::vector<double> n;
  std::vector<std::vector<double>> y(5);
  for (const ScalingRow* r : rows) {
    n.push_back(r->n);
    y[0].push_back(median(r->margin_seconds));
    y[1].push_back(median(r->record_seconds));
    y[2].push_back(r->random_mean);
    y[3].push_back(r->retrain_ours);
    y[4].push_back(r->retrain_lib3);
  }
  std::size_t a = 0;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (std::abs(std::log(n[i] / 20000.0)) < std::abs(std::log(n[a] / 20000.0))) a = i;
  const std::size_t z = rows.size() - 1;
  const char* names[5] = {"margin removal (median)", "24-token record (median)",
                          "random token (mean)", "retrain ours", "retrain LIBSVM 1e-3"};
  std::printf("\n| %s: cost | exponent, least squares over n = %d..%d | exponent, n = %d -> %d |\n",
              stream.c_str(), rows.front()->n, rows.back()->n, rows[a]->n, rows[z]->n);
  std::printf("|---|---:|---:|\n");
  for (int k = 0; k < 5; ++k) {
    const double two = a < z ? std::log(y[k][z] / y[k][a]) / std::log(n[z] / n[a]) : 0.0;
    std::printf("| %s | %.2f | %.2f |\n", names[k], loglog_slope(n, y[k]), two);
  }
  std::fflush(stdout);
}

}  // namespace svattn::bench
