// SMO (LIBSVM-style second-order working-set selection) in fp64 on F(a) = a'(K + mu I)a - diag(K)'a,
// sum a = 1, 0 <= a <= C; then the canonical refinement defines the returned state.
#include "svattn/batch_solver.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "canonical.h"
#include "row_cache.h"
#include "support/clock.h"
#include "support_columns.h"
#include "svattn/errors.h"

namespace svattn {
namespace {

class BatchAccess final : public detail::KernelAccess {
 public:
  BatchAccess(const TokenSet& t, detail::RowCache& cache, const std::vector<double>& diag,
              const KernelSettings& k)
      : t_(t), cache_(cache), diag_(diag), k_(k) {
    cols_.resize_rows(t.size());
    all_.resize(t.size());
    for (int i = 0; i < t.size(); ++i) all_[i] = i;
  }
  int num_slots() const override { return t_.size(); }
  bool active(int) const override { return true; }
  TokenId id(int slot) const override { return t_.ids[slot]; }
  double diag(int slot) const override { return diag_[slot]; }
  const char* live_flags() const override { return nullptr; }
  const double* diag_values() const override { return diag_.data(); }
  void require(int j) override {
    if (cols_.pos(j) >= 0) return;
    const double* kj = cache_.row(j);  // K(j, :) == K(:, j) bit for bit
    cols_.add(j, all_, [&](int i) { return kj[i]; });
  }
  int pos(int j) const override { return cols_.pos(j); }
  const double* row(int i) override { return cols_.row(i); }
  double kernel_value(int i, int j) const override {
    return kernel(k_, t_.keys.row(i).data(), t_.keys.row(j).data(), static_cast<int>(t_.keys.cols()));
  }

 private:
  const TokenSet& t_;
  detail::RowCache& cache_;
  const std::vector<double>& diag_;
  const KernelSettings& k_;
  detail::SupportColumns cols_;
  std::vector<int> all_;
};

TokenSet sorted_by_id(const TokenSet& in) {
  std::vector<int> idx(in.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return in.ids[a] < in.ids[b]; });
  TokenSet out;
  out.ids.resize(idx.size());
  out.keys.resize(in.keys.rows(), in.keys.cols());
  out.values.resize(in.values.rows(), in.values.cols());
  for (size_t r = 0; r < idx.size(); ++r) {
    out.ids[r] = in.ids[idx[r]];
    out.keys.row(r) = in.keys.row(idx[r]);
    out.values.row(r) = in.values.row(idx[r]);
  }
  return out;
}

}  // namespace

BatchResult solve_batch(const TokenSet& input, const BatchSettings& settings) {
  settings.validate();
  input.validate(settings.problem);
  const TokenSet t = sorted_by_id(input);
  const int n = t.size();
  const int d = static_cast<int>(t.keys.cols());
  const ProblemSettings& p = settings.problem;
  const double C = p.C, mu = p.ridge;
  BatchResult out;

  std::vector<double> diag(n);
  for (int i = 0; i < n; ++i) diag[i] = kernel(p.kernel, t.keys.row(i).data(), t.keys.row(i).data(), d);
  detail::RowCache cache(p.kernel, t.keys, settings.cache_mib * std::size_t{1} << 20);
  BatchAccess access(t, cache, diag, p.kernel);

  std::vector<double> alpha(n, 0.0);
  support::Stopwatch watch;
  if (n > 0 && !detail::is_warmup(n, C)) {
    // Feasible start: the first floor(1/C) tokens at C, the next one takes the remainder.
    double left = 1.0;
    for (int i = 0; i < n && left > 0; ++i) {
      alpha[i] = std::min(C, left);
      left -= alpha[i];
    }
    // G_i = ((K + mu I) a)_i - K_ii / 2 : half the gradient of F.
    std::vector<double> G(n);
    for (int i = 0; i < n; ++i) G[i] = mu * alpha[i] - diag[i] / 2;
    for (int j = 0; j < n; ++j) {
      if (alpha[j] == 0) continue;
      const double* kj = cache.row(j);
      for (int i = 0; i < n; ++i) G[i] += kj[i] * alpha[j];
    }
    double scale = 1.0;
    for (double v : diag) scale = std::max(scale, v);
    const double stop = settings.smo_tol * scale;
    const long cap = settings.max_smo_iterations > 0
                         ? settings.max_smo_iterations
                         : std::max<long>(10000000L, 100L * n);
    const double kTau = 1e-12;
    long it = 0;
    for (; it < cap; ++it) {
      // i: the most promising coefficient to raise (min G over a < C).
      int i = -1;
      double gmin = HUGE_VAL;
      double gmax = -HUGE_VAL;
      for (int k = 0; k < n; ++k) {
        if (alpha[k] < C && G[k] < gmin) {
          gmin = G[k];
          i = k;
        }
        if (alpha[k] > 0 && G[k] > gmax) gmax = G[k];
      }
      if (i < 0 || gmax - gmin <= stop) break;
      const double* ki = cache.row(i);
      // j: second-order choice among a > 0 with G_j > G_i.
      int j = -1;
      double best = -HUGE_VAL;
      for (int k = 0; k < n; ++k) {
        if (alpha[k] <= 0 || G[k] <= gmin) continue;
        const double bgap = G[k] - gmin;
        double a = diag[i] + diag[k] + 2 * mu - 2 * ki[k];
        if (k == i) continue;
        if (a <= 0) a = kTau;
        const double gain = bgap * bgap / a;
        if (gain > best) {
          best = gain;
          j = k;
        }
      }
      if (j < 0) break;
      const double* kj = cache.row(j);
      ki = cache.row(i);
      double a = diag[i] + diag[j] + 2 * mu - 2 * ki[j];
      if (a <= 0) a = kTau;
      double delta = (G[j] - G[i]) / a;
      delta = std::min({delta, C - alpha[i], alpha[j]});
      if (delta <= 0) break;
      alpha[i] += delta;
      alpha[j] -= delta;
      if (alpha[i] > C - 1e-300 && C - alpha[i] < 1e-18 * C) alpha[i] = C;
      if (alpha[j] < 1e-300) alpha[j] = 0;
      for (int k = 0; k < n; ++k) G[k] += delta * (ki[k] - kj[k]);
      G[i] += mu * delta;
      G[j] -= mu * delta;
    }
    out.diagnostics.smo_iterations = it;
    if (it >= cap) out.state.status = Status::kIterationLimit;
  }
  out.diagnostics.smo_seconds = watch.lap();
  detail::CanonicalResult res = detail::canonicalize(access, alpha, p, settings.tolerances, nullptr);
  out.diagnostics.refine_seconds = watch.seconds();
  out.diagnostics.refine_iterations = res.repairs;
  out.diagnostics.kernel_rows_computed = cache.rows_computed();
  Status st = res.status;
  if (out.state.status == Status::kIterationLimit && st != Status::kOptimal) st = Status::kIterationLimit;
  out.state = detail::build_state(p, t, res.alpha, res.set, res.b, res.kkt, st, res.warmup);
  return out;
}

}  // namespace svattn
