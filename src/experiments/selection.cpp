// SV certified selection and the attention-score eviction baselines under one token budget.
#include "experiments/selection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "svattn/errors.h"
#include "experiments/streams.h"
#include "svattn/memory.h"

namespace svattn::experiments {
namespace {

/// softmax(q . k_j / sqrt(d)) over rows [0, count) of keys, added into score[0..count).
void add_softmax(const RowMatrix& keys, int count, const Eigen::Ref<const Eigen::VectorXd>& q,
                 Eigen::VectorXd& score) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(keys.cols()));
  Eigen::VectorXd logits = (keys.topRows(count) * q) * scale;
  const double m = logits.maxCoeff();
  Eigen::VectorXd w = (logits.array() - m).exp().matrix();
  w /= w.sum();
  score.head(count) += w;
}

std::vector<int> range(int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i < hi; ++i) v.push_back(i);
  return v;
}

Selection sv_selection(const SelectionProblem& p, bool bounded) {
  const RowMatrix& keys = *p.keys;
  const int n = static_cast<int>(keys.rows());
  MemorySettings s;
  s.problem = p.sv;
  s.problem.C = 1.0 / static_cast<double>(p.budget);
  if (bounded) {
    s.mode = MemoryMode::kBounded;
    s.token_budget = static_cast<std::size_t>(p.budget);
  }
  s.validate();
  Memory mem(s, static_cast<int>(keys.cols()), static_cast<int>(keys.cols()));
  for (int i = 0; i < n; ++i) mem.add(i, keys.row(i).transpose(), keys.row(i).transpose());
  const State st = mem.state();
  Selection sel;
  sel.support_size =
      static_cast<int>(st.partition.margin.size() + st.partition.error.size());
  // Every token the memory holds is a candidate (bounded mode may hold reserve tokens while it is
  // within budget); rank by alpha, ties to the more recent token.
  Eigen::VectorXd score = Eigen::VectorXd::Constant(n, -1.0);
  std::vector<int> candidates;
  for (std::size_t k = 0; k < st.ids.size(); ++k) {
    const int row = static_cast<int>(st.ids[k]);
    score(row) = st.alpha[k];
    candidates.push_back(row);
  }
  sel.truncated = sel.support_size > p.budget;
  sel.kept = top_k(score, candidates, std::min(p.budget, n));
  return sel;
}

}  // namespace

std::string method_name(Method m) {
  switch (m) {
    case Method::kSv: return "sv";
    case Method::kSvBounded: return "sv_bounded";
    case Method::kHeavyHitters: return "heavy_hitters";
    case Method::kH2o: return "h2o";
    case Method::kH2oOracle: return "h2o_oracle";
    case Method::kSnapKv: return "snapkv";
    case Method::kRecency: return "recency";
    case Method::kRandom: return "random";
  }
  return "?";
}

std::string method_label(Method m) {
  switch (m) {
    case Method::kSv: return "SV certified (S∪E, top-α)";
    case Method::kSvBounded: return "SV bounded mode (streaming)";
    case Method::kHeavyHitters: return "heavy hitters (accumulated attention)";
    case Method::kH2o: return "H2O (heavy B/2 + recent B/2)";
    case Method::kH2oOracle: return "H2O oracle (future queries)";
    case Method::kSnapKv: return "SnapKV-style (window scoring)";
    case Method::kRecency: return "recency";
    case Method::kRandom: return "random";
  }
  return "?";
}

Eigen::VectorXd causal_accumulated_attention(const RowMatrix& keys, const RowMatrix& queries) {
  const int n = static_cast<int>(keys.rows());
  if (queries.rows() != keys.rows() || queries.cols() != keys.cols()) {
    throw InvalidArgument("causal attention needs one query per key of the same dimension");
  }
  Eigen::VectorXd score = Eigen::VectorXd::Zero(n);
  for (int t = 0; t < n; ++t) add_softmax(keys, t + 1, queries.row(t).transpose(), score);
  return score;
}

Eigen::VectorXd accumulated_attention(const RowMatrix& keys, const RowMatrix& queries) {
  if (queries.cols() != keys.cols()) throw InvalidArgument("query and key dimensions differ");
  const int n = static_cast<int>(keys.rows());
  Eigen::VectorXd score = Eigen::VectorXd::Zero(n);
  for (int t = 0; t < queries.rows(); ++t) add_softmax(keys, n, queries.row(t).transpose(), score);
  return score;
}

std::vector<int> top_k(const Eigen::VectorXd& score, const std::vector<int>& candidates, int k) {
  std::vector<int> c = candidates;
  k = std::clamp(k, 0, static_cast<int>(c.size()));
  std::partial_sort(c.begin(), c.begin() + k, c.end(), [&](int a, int b) {
    if (score(a) != score(b)) return score(a) > score(b);
    return a > b;
  });
  c.resize(static_cast<std::size_t>(k));
  std::sort(c.begin(), c.end());
  return c;
}

Selection select_tokens(Method m, const SelectionProblem& p) {
  if (p.keys == nullptr) throw InvalidArgument("select_tokens: no keys");
  if (p.budget < 1) throw InvalidArgument("select_tokens: budget must be >= 1");
  const RowMatrix& keys = *p.keys;
  const int n = static_cast<int>(keys.rows());
  const int b = std::min(p.budget, n);
  const bool needs_queries =
      m == Method::kHeavyHitters || m == Method::kH2o || m == Method::kSnapKv;
  if (needs_queries && p.queries == nullptr && (m == Method::kSnapKv || p.causal_scores == nullptr)) {
    throw InvalidArgument("select_tokens: " + method_name(m) + " needs the observed queries");
  }
  if (m == Method::kH2oOracle && p.future_queries == nullptr && p.oracle_scores == nullptr) {
    throw InvalidArgument("select_tokens: h2o_oracle needs the future queries");
  }
  Selection sel;
  if (b == n) {  // everything fits
    sel.kept = range(0, n);
    if (m == Method::kSv || m == Method::kSvBounded) return sv_selection(p, m == Method::kSvBounded);
    return sel;
  }
  switch (m) {
    case Method::kSv: return sv_selection(p, false);
    case Method::kSvBounded: return sv_selection(p, true);
    case Method::kHeavyHitters: {
      const Eigen::VectorXd s =
          p.causal_scores ? *p.causal_scores : causal_accumulated_attention(keys, *p.queries);
      sel.kept = top_k(s, range(0, n), b);
      return sel;
    }
    case Method::kH2o: {
      const int recent = b - b / 2;
      const Eigen::VectorXd s =
          p.causal_scores ? *p.causal_scores : causal_accumulated_attention(keys, *p.queries);
      sel.kept = top_k(s, range(0, n - recent), b / 2);
      for (int i = n - recent; i < n; ++i) sel.kept.push_back(i);
      return sel;
    }
    case Method::kH2oOracle: {
      const Eigen::VectorXd s =
          p.oracle_scores ? *p.oracle_scores : accumulated_attention(keys, *p.future_queries);
      sel.kept = top_k(s, range(0, n), b);
      return sel;
    }
    case Method::kSnapKv: {
      const int w = std::clamp(b / 4, 1, 32);
      Eigen::VectorXd s = Eigen::VectorXd::Zero(n);
      for (int t = n - w; t < n; ++t) add_softmax(keys, t + 1, p.queries->row(t).transpose(), s);
      // Max pooling over a window of 7 prefix positions (SnapKV's clustering of neighbours).
      const int prefix = n - w;
      Eigen::VectorXd pooled(n);
      pooled.setConstant(-1.0);
      for (int j = 0; j < prefix; ++j) {
        double best = s(j);
        for (int o = -3; o <= 3; ++o) {
          const int k = j + o;
          if (k >= 0 && k < prefix) best = std::max(best, s(k));
        }
        pooled(j) = best;
      }
      sel.kept = top_k(pooled, range(0, prefix), b - w);
      for (int i = prefix; i < n; ++i) sel.kept.push_back(i);
      return sel;
    }
    case Method::kRecency:
      sel.kept = range(n - b, n);
      return sel;
    case Method::kRandom: {
      Rng rng(p.seed);
      sel.kept = sample_without_replacement(n, b, rng);
      return sel;
    }
  }
  throw InvalidArgument("select_tokens: unknown method");
}

}  // namespace svattn::experiments
