// Token selection under one budget (E2, E4): SV certified selection and the score-based eviction
// baselines (H2O heavy hitters, its oracle variant, SnapKV-style window scoring, recency, random).
// Plain Eigen; attention is softmax(q.k / sqrt(d)) over the keys a query may see.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/types.h"

namespace svattn::experiments {

enum class Method {
  kSv,            ///< SV certified selection: S ∪ E of the audit-mode memory (C = 1/B); top-alpha
                  ///< when |S ∪ E| > B
  kSvBounded,     ///< the same memory in bounded mode (reserve tokens evicted while size > B,
                  ///< during the stream); top-alpha when more than B remain
  kHeavyHitters,  ///< top-B tokens by accumulated causal attention of the observed queries
  kH2o,           ///< H2O: B/2 heavy hitters (as above) + the B - B/2 most recent tokens
  kH2oOracle,     ///< top-B tokens by attention accumulated from the real future queries
  kSnapKv,        ///< SnapKV-style: the last w tokens plus the top B - w earlier tokens by the
                  ///< window queries' attention, max-pooled over 7 positions
  kRecency,       ///< the B most recent tokens
  kRandom,        ///< B tokens uniformly at random
};

std::string method_name(Method m);   ///< "sv", "sv_bounded", "heavy_hitters", "h2o", ...
std::string method_label(Method m);  ///< human-readable, for tables

struct SelectionProblem {
  const RowMatrix* keys = nullptr;            ///< n x d in stream order (token id = row)
  const RowMatrix* queries = nullptr;         ///< n x d: query t is issued at step t (causal)
  const RowMatrix* future_queries = nullptr;  ///< m x d: queries after the stream (oracle only)
  int budget = 0;                             ///< B >= 1
  /// Kernel and ridge of the SV memory; C is replaced by 1/B.
  ProblemSettings sv;
  std::uint64_t seed = 1;                     ///< random baseline
  /// Optional caches (reused across budgets): causal_accumulated_attention(keys, queries) and
  /// accumulated_attention(keys, future_queries). Computed when null.
  const Eigen::VectorXd* causal_scores = nullptr;
  const Eigen::VectorXd* oracle_scores = nullptr;
};

struct Selection {
  std::vector<int> kept;  ///< retained rows, ascending; size min(B, n)
  int support_size = -1;  ///< SV: |S ∪ E| before truncation (-1 for other methods)
  bool truncated = false; ///< SV: |S ∪ E| > B, top-alpha applied
};

/// Throws InvalidArgument when a required input is missing (queries for the attention methods,
/// future queries for the oracle) or the budget is < 1.
Selection select_tokens(Method m, const SelectionProblem& p);

/// Score of token j = sum over queries t >= j of softmax_t(j), the softmax of query t over keys
/// 0..t (H2O's accumulated attention, causal).
Eigen::VectorXd causal_accumulated_attention(const RowMatrix& keys, const RowMatrix& queries);
/// Score of token j = sum over all queries of softmax(j) over all keys (non-causal, oracle).
Eigen::VectorXd accumulated_attention(const RowMatrix& keys, const RowMatrix& queries);

/// Indices of the k largest scores among `candidates` (ties: larger index first), ascending.
std::vector<int> top_k(const Eigen::VectorXd& score, const std::vector<int>& candidates, int k);

}  // namespace svattn::experiments
