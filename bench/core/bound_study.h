// Measured evaluation of screening bounds (docs/performance.md "Screening bounds,
// measured"): a sustained sequence of margin-token removals from a restored memory; after each one
// the exact change of every reserve token's gradient (from the keys, outside the memory) is set
// against what each candidate bound would have to allow for. Counts are of reserve tokens whose
// gradient before the removal is below the bound, i.e. that the bound could not clear for one
// fresh removal; the accumulated rows compare the bounds over the whole sequence.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "bench_common.h"
#include "svattn/batch_solver.h"
#include "svattn/kernel.h"
#include "svattn/memory.h"

namespace svattn::bench {

struct StudyOp {
  double cs = 0;         // sqrt(kmax) |dw| (the Cauchy-Schwarz allowance of one removal)
  double true_max = 0;   // max_i |<phi_i, dw>| over reserve tokens
  double true_p99 = 0;   // 99th percentile
  long cs_fail = 0;      // reserve tokens with g_i(before) - |db| < cs
  long top_fail = 0;     // ... < |top-8 movers exactly| + sqrt(kmax) |dw - top-8 part|
  long spread_fail = 0;  // ... < s_i |da|_1 (s_i: half the range of K_ij over the support)
  long oracle_fail = 0;  // ... < |<phi_i, dw>| (any rigorous O(1) bound rechecks at least these)
};

inline void bound_study(int n, const BenchProblem& p, int removals) {
  const RowMatrix keys = bench_keys(n, p);  // Gaussian N(0, I_d), as the scaling rows
  const TokenSet tokens = TokenSet::from_rows(keys);
  BatchSettings bs;
  bs.problem = p.settings();
  State st = solve_batch(tokens, bs).state;
  MemorySettings ms;
  ms.problem = p.settings();
  Memory memory = Memory::restore(ms, tokens, st);
  const KernelSettings& ks = ms.problem.kernel;
  const int d = static_cast<int>(keys.cols());
  auto kv = [&](TokenId a, TokenId b) {
    return kernel(ks, keys.row(a).data(), keys.row(b).data(), d);
  };
  auto alpha_map = [](const State& s) {
    std::map<TokenId, double> a;
    for (std::size_t r = 0; r < s.ids.size(); ++r)
      if (s.alpha[r] > 0) a[s.ids[r]] = s.alpha[r];
    return a;
  };
  std::vector<StudyOp> ops;
  std::map<TokenId, double> a_first = alpha_map(st);
  const double b_first = st.b;
  std::vector<double> cs_sum(n, 0.0);  // accumulated allowance per token (path of removals)
  double cs_total = 0;
  const std::vector<TokenId> victims(
      st.partition.margin.begin(),
      st.partition.margin.begin() + std::min<std::size_t>(removals, st.partition.margin.size()));
  std::vector<double> g_first;
  for (TokenId c : victims) {
    const State s0 = memory.state();
    const std::map<TokenId, double> a0 = alpha_map(s0);
    memory.remove(c);
    const State s1 = memory.state();
    const std::map<TokenId, double> a1 = alpha_map(s1);
    std::map<TokenId, double> da;
    for (const auto& [id, a] : a0) da[id] -= a;
    for (const auto& [id, a] : a1) da[id] += a;
    std::vector<std::pair<TokenId, double>> mv(da.begin(), da.end());
    double q = 0;
    for (const auto& [i, x] : mv)
      for (const auto& [j, y] : mv) q += x * y * kv(i, j);
    StudyOp op;
    op.cs = std::sqrt(std::max(0.0, q));
    cs_total += op.cs;
    // top-8 movers by |da|
    std::vector<std::pair<TokenId, double>> top = mv;
    std::sort(top.begin(), top.end(),
              [](const auto& x, const auto& y) { return std::abs(x.second) > std::abs(y.second); });
    top.resize(std::min<std::size_t>(8, top.size()));
    double qr = 0;  // |dw - top part|^2
    {
      std::map<TokenId, double> rest = da;
      for (const auto& [id, x] : top) rest[id] = 0;
      for (const auto& [i, x] : rest)
        for (const auto& [j, y] : rest)
          if (x != 0 && y != 0) qr += x * y * kv(i, j);
    }
    const double rest_cs = std::sqrt(std::max(0.0, qr));
    const double db = s1.b - s0.b;
    double l1 = 0, mass = 0;
    for (const auto& [j, x] : mv) {
      l1 += std::abs(x);
      mass += x;
    }
    std::vector<double> changes;
    for (std::size_t r = 0; r < s1.ids.size(); ++r) {
      const TokenId i = s1.ids[r];
      if (s1.alpha[r] > 0 || a0.count(i)) continue;  // reserve before and after
      double w0 = 0, dw = 0, topv = 0;
      for (const auto& [j, x] : a0) w0 += x * kv(i, j);
      for (const auto& [j, x] : mv) dw += x * kv(i, j);
      for (const auto& [j, x] : top) topv += x * kv(i, j);
      double kmin = 1e300, kmx = -1e300;
      for (const auto& [j, x] : mv) {
        const double k = kv(i, j);
        kmin = std::min(kmin, k);
        kmx = std::max(kmx, k);
      }
      for (const auto& [j, x] : a0) {
        const double k = kv(i, j);
        kmin = std::min(kmin, k);
        kmx = std::max(kmx, k);
      }
      const double spread = (kmx - kmin) / 2 * l1 + std::abs(mass);
      const double g0 = w0 - kv(i, i) / 2 + s0.b;  // exact gradient before (reserve: no ridge)
      const double slack = g0 + db;                // the offset is exact in every bound
      changes.push_back(std::abs(dw));
      if (slack < op.cs) ++op.cs_fail;
      if (slack < std::abs(topv) + rest_cs) ++op.top_fail;
      if (slack < spread) ++op.spread_fail;
      if (slack < std::abs(dw)) ++op.oracle_fail;
    }
    std::sort(changes.begin(), changes.end());
    op.true_max = changes.empty() ? 0 : changes.back();
    op.true_p99 = changes.empty() ? 0 : changes[changes.size() * 99 / 100];
    ops.push_back(op);
  }
  // Accumulated over the sequence: the sum of allowances (what a bound that forgets erased
  // tokens' kernel values must add up), the net |w_end - w_first| (needs them) and the truth.
  const State sl = memory.state();
  std::map<TokenId, double> dtot;
  for (const auto& [id, a] : a_first) dtot[id] -= a;
  for (const auto& [id, a] : alpha_map(sl)) dtot[id] += a;
  double qt = 0;
  for (const auto& [i, x] : dtot)
    for (const auto& [j, y] : dtot) qt += x * y * kv(i, j);
  double tmax = 0;
  long acc_cs = 0, acc_net = 0, acc_oracle = 0;
  const double net = std::sqrt(std::max(0.0, qt));
  const double db = sl.b - b_first;
  for (std::size_t r = 0; r < sl.ids.size(); ++r) {
    const TokenId i = sl.ids[r];
    if (sl.alpha[r] > 0 || a_first.count(i)) continue;
    double w0 = 0, dw = 0;
    for (const auto& [j, x] : a_first) w0 += x * kv(i, j);
    for (const auto& [j, x] : dtot) dw += x * kv(i, j);
    const double slack = w0 - kv(i, i) / 2 + b_first + db;
    tmax = std::max(tmax, std::abs(dw));
    if (slack < cs_total) ++acc_cs;
    if (slack < net) ++acc_net;
    if (slack < std::abs(dw)) ++acc_oracle;
  }
  std::printf(
      "\n### Screening bounds, measured (n = %d, d = %d, sigma^2 = %g d, C = %g, |S u E| = "
      "%zu)\n\n",
      n, p.d, p.sigma2_per_dim, p.C, st.partition.margin.size() + st.partition.error.size());
  std::printf(
      "| removal | sqrt(kmax)\\|dw\\| | max_i \\|<phi_i, dw>\\| | p99 | CS / max | reserve not "
      "cleared: CS | top-8 exact + CS rest | spread s_i \\|da\\|_1 | oracle \\|<phi_i, dw>\\| |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const StudyOp& o = ops[k];
    std::printf("| %zu | %.3e | %.3e | %.3e | %.0fx | %ld | %ld | %ld | %ld |\n", k + 1, o.cs,
                o.true_max, o.true_p99, o.true_max > 0 ? o.cs / o.true_max : 0.0, o.cs_fail,
                o.top_fail, o.spread_fail, o.oracle_fail);
  }
  std::printf(
      "\nAccumulated over the %zu removals: sum of allowances %.3e (not cleared: %ld), net "
      "sqrt(kmax)|w_end - w_first| %.3e (%ld; needs erased tokens' kernel values), true max "
      "%.3e (%ld)\n",
      ops.size(), cs_total, acc_cs, net, acc_net, tmax, acc_oracle);
  std::fflush(stdout);
}

}  // namespace svattn::bench
