// H2O heavy-hitter scoring and coefficient decay (docs/layers.md §4).
#include "svattn/torch/eviction.h"

#include <cmath>
#include <limits>

#include "svattn/errors.h"

namespace svattn::layers {

using torch::Tensor;

Tensor h2o_scores(const Tensor& q, const Tensor& k, bool causal) {
  if (q.dim() < 2 || k.dim() != q.dim() || q.size(-1) != k.size(-1))
    throw InvalidArgument("h2o_scores: q must be [..., M, d] and k [..., N, d]");
  const auto M = q.size(-2), N = k.size(-2);
  if (causal && M > N) throw InvalidArgument("h2o_scores: causal scoring needs M <= N");
  Tensor s = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (causal) {
    auto opts = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
    Tensor allowed =
        torch::arange(N, opts).unsqueeze(0) <= (torch::arange(M, opts) + (N - M)).unsqueeze(1);
    s = s.masked_fill(~allowed, -std::numeric_limits<double>::infinity());
  }
  return torch::softmax(s, -1).sum(-2);
}

Tensor h2o_keep_mask(const Tensor& scores, std::int64_t budget, std::int64_t recent) {
  if (budget < 0 || recent < 0)
    throw InvalidArgument("h2o_keep_mask: budget and recent must be >= 0");
  const auto N = scores.size(-1);
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(scores.device());
  Tensor pos = torch::arange(N, opts);
  Tensor is_recent = (pos >= N - recent).expand(scores.sizes());
  Tensor keep = is_recent.clone();
  const auto b = std::min<std::int64_t>(budget, std::max<std::int64_t>(N - recent, 0));
  if (b > 0) {
    // Rank the older tokens by score (descending, ties to the lower index via a stable sort).
    Tensor s = scores.masked_fill(is_recent, -std::numeric_limits<double>::infinity());
    Tensor order = std::get<1>(s.sort(/*stable=*/true, -1, /*descending=*/true));
    keep.scatter_(-1, order.narrow(-1, 0, b), true);
  }
  return keep;
}

Tensor coefficient_decay(const Tensor& alpha, const Tensor& deleted, double factor) {
  if (!(factor >= 0 && factor < 1))
    throw InvalidArgument("coefficient_decay: factor must be in [0, 1)");
  if (alpha.sizes() != deleted.sizes()) throw InvalidArgument("coefficient_decay: shapes differ");
  Tensor a = torch::where(deleted.to(torch::kBool), alpha * factor, alpha);
  return a / a.sum(-1, true);
}

}  // namespace svattn::layers
