// E2's measurement: one skewed-redundancy stream per seed, every method's selection at every budget,
// scored (docs/experiments.md "E2").
#include <algorithm>
#include <cmath>
#include <limits>

#include "common.h"
#include "internal.h"
#include "experiments/streams.h"

namespace svattn::experiments::e2_rare_recall {
namespace {

/// One skewed-redundancy stream with its observed and future queries.
struct SkewedStream {
  RowMatrix keys;            // T x d
  RowMatrix queries;         // T x d: query t = key t + noise
  RowMatrix future;          // T x d: R retrieval queries + (T - R) frequent queries, shuffled
  std::vector<int> rare;     // rows of the rare items, ascending
  std::vector<int> pattern;  // per row: pattern index, -1 for rare
  std::vector<int> retrieval_row;  // per rare item k: its retrieval query's row in `future`
};

SkewedStream make_stream(const Settings& p, Rng& rng) {
  SkewedStream s;
  const int T = p.tokens, d = p.dim;
  const int R = std::max(1, static_cast<int>(std::lround(p.rare_share * T)));
  const RowMatrix centres = gaussian_keys(p.patterns, d, 1.0, rng);
  std::vector<double> cum;
  double z = 0;
  for (int f = 0; f < p.patterns; ++f) {
    z += 1.0 / (f + 1);
    cum.push_back(z);
  }
  auto draw_pattern = [&]() {
    const double u = rng.uniform() * z;
    int f = 0;
    while (f + 1 < p.patterns && u >= cum[static_cast<std::size_t>(f)]) ++f;
    return f;
  };
  auto noisy = [&](const Eigen::RowVectorXd& c) {
    Eigen::RowVectorXd x(d);
    for (int j = 0; j < d; ++j) x(j) = c(j) + p.noise * rng.normal();
    return x;
  };
  s.rare = sample_without_replacement(T, R, rng);
  std::vector<char> is_rare(static_cast<std::size_t>(T), 0);
  for (int r : s.rare) is_rare[static_cast<std::size_t>(r)] = 1;
  s.keys.resize(T, d);
  s.queries.resize(T, d);
  s.pattern.assign(static_cast<std::size_t>(T), -1);
  for (int t = 0; t < T; ++t) {
    if (is_rare[static_cast<std::size_t>(t)]) {
      for (int j = 0; j < d; ++j) s.keys(t, j) = rng.normal();
    } else {
      const int f = draw_pattern();
      s.pattern[static_cast<std::size_t>(t)] = f;
      s.keys.row(t) = noisy(centres.row(f));
    }
    s.queries.row(t) = noisy(s.keys.row(t));
  }
  // Future workload: one retrieval query per rare item, the rest frequent queries, shuffled.
  std::vector<int> slots(static_cast<std::size_t>(T));
  for (int i = 0; i < T; ++i) slots[static_cast<std::size_t>(i)] = i;
  shuffle_in_place(slots, rng);
  s.future.resize(T, d);
  s.retrieval_row.resize(static_cast<std::size_t>(R));
  for (int i = 0; i < T; ++i) {
    const int row = slots[static_cast<std::size_t>(i)];
    if (i < R) {
      s.future.row(row) = noisy(s.keys.row(s.rare[static_cast<std::size_t>(i)]));
      s.retrieval_row[static_cast<std::size_t>(i)] = row;
    } else {
      s.future.row(row) = noisy(centres.row(draw_pattern()));
    }
  }
  return s;
}

Outcome score(const SkewedStream& s, const Selection& sel, int patterns) {
  Outcome o;
  o.kept = static_cast<int>(sel.kept.size());
  o.support = sel.support_size;
  o.truncated = sel.truncated;
  std::vector<char> kept(static_cast<std::size_t>(s.keys.rows()), 0);
  for (int k : sel.kept) kept[static_cast<std::size_t>(k)] = 1;
  int hit = 0, retrieved = 0;
  for (std::size_t i = 0; i < s.rare.size(); ++i) {
    const int r = s.rare[i];
    if (kept[static_cast<std::size_t>(r)]) ++hit;
    const Eigen::RowVectorXd q = s.future.row(s.retrieval_row[i]);
    int best = -1;
    double bd = std::numeric_limits<double>::infinity();
    for (int k : sel.kept) {
      const double dist = (s.keys.row(k) - q).squaredNorm();
      if (dist < bd) {
        bd = dist;
        best = k;
      }
    }
    if (best == r) ++retrieved;
  }
  std::vector<char> covered(static_cast<std::size_t>(patterns), 0);
  for (int k : sel.kept) {
    const int f = s.pattern[static_cast<std::size_t>(k)];
    if (f >= 0) covered[static_cast<std::size_t>(f)] = 1;
  }
  o.recall = static_cast<double>(hit) / static_cast<double>(s.rare.size());
  o.retrieved = static_cast<double>(retrieved) / static_cast<double>(s.rare.size());
  o.coverage = static_cast<double>(std::count(covered.begin(), covered.end(), 1)) / patterns;
  return o;
}

}  // namespace

Result measure(const ExperimentOptions& o) {
  Result res;
  res.begin(o);
  res.settings = detail::with_overrides(preset_settings(o.preset), kInfo.id, o);
  const Settings& p = res.settings;
  const int seeds = p.seeds;
  for (Method m : kMethods)
    res.outcomes[method_name(m)].assign(p.budgets.size(), std::vector<Outcome>());
  Progress progress("E2", static_cast<long>(seeds) * static_cast<long>(p.budgets.size()),
                    "seed×budget", o.progress);
  for (int sd = 0; sd < seeds; ++sd) {
    Rng rng(derive_seed(o.seed, 2000 + static_cast<std::uint64_t>(sd)));
    const SkewedStream s = make_stream(p, rng);
    ProblemSettings sv;
    sv.kernel.type = KernelType::kRbf;
    sv.kernel.bandwidth = median_pairwise_distance(s.keys, 400, rng);
    res.sigmas.push_back(sv.kernel.bandwidth);
    const Eigen::VectorXd causal = causal_accumulated_attention(s.keys, s.queries);
    const Eigen::VectorXd oracle = accumulated_attention(s.keys, s.future);
    for (std::size_t bi = 0; bi < p.budgets.size(); ++bi) {
      const int b = p.budgets[bi];
      SelectionProblem sp;
      sp.keys = &s.keys;
      sp.queries = &s.queries;
      sp.future_queries = &s.future;
      sp.causal_scores = &causal;
      sp.oracle_scores = &oracle;
      sp.budget = b;
      sp.sv = sv;
      sp.seed = derive_seed(o.seed, 900000 + static_cast<std::uint64_t>(sd) * 1000 + static_cast<std::uint64_t>(b));
      for (Method m : kMethods)
        res.outcomes[method_name(m)][bi].push_back(score(s, select_tokens(m, sp), p.patterns));
      progress.tick();
    }
  }
  progress.finish();
  res.end();
  return res;
}

ExperimentResult run(const ExperimentOptions& o) { return render(measure(o), o); }

}  // namespace svattn::experiments::e2_rare_recall
