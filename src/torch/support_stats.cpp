// Distinct support keys of chunked SV memories (include/svattn/torch/support_stats.h): a key's
// duplicate class is the first earlier token with the same bytes; a memory's distinct support is
// the number of classes among its S ∪ E tokens.
#include "svattn/torch/support_stats.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "svattn/errors.h"

namespace svattn::layers {
namespace {

// class_of[t] = the first token whose key has the same bytes as token t's.
std::vector<std::int64_t> duplicate_classes(const char* k, std::int64_t T, std::size_t row_bytes) {
  std::unordered_map<std::string, std::int64_t> first;
  std::vector<std::int64_t> cls(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) {
    std::string key(k + static_cast<std::size_t>(t) * row_bytes, row_bytes);
    cls[static_cast<std::size_t>(t)] = first.emplace(std::move(key), t).first->second;
  }
  return cls;
}

}  // namespace

DistinctSupport distinct_support(const torch::Tensor& keys, const torch::Tensor& role,
                                 const torch::Tensor& alpha, std::int64_t chunk) {
  if (keys.dim() != 4 || role.dim() != 4 || alpha.sizes() != role.sizes() || chunk < 1 ||
      role.size(0) != keys.size(0) || role.size(1) != keys.size(1) || role.size(3) != keys.size(2))
    throw InvalidArgument("distinct_support: keys [B,H,T,d] and role/alpha [B,H,nC,T] expected");
  const auto B = keys.size(0), H = keys.size(1), T = keys.size(2), d = keys.size(3);
  const auto nc = role.size(2);
  // Compared in the keys' own dtype: a conversion could merge keys that differ.
  const torch::Tensor k = keys.detach().to(torch::kCPU).contiguous();
  const torch::Tensor r = role.to(torch::kCPU, torch::kInt8).contiguous();
  const torch::Tensor a = alpha.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  const char* kp = static_cast<const char*>(k.data_ptr());
  const std::size_t row_bytes = static_cast<std::size_t>(d) * k.element_size();
  const std::int8_t* rp = r.data_ptr<std::int8_t>();
  const double* ap = a.data_ptr<double>();
  DistinctSupport out;
  out.distinct_per_head.assign(static_cast<std::size_t>(H), 0.0);
  std::vector<std::int64_t> stamp(static_cast<std::size_t>(T), -1);
  std::vector<double> class_alpha(static_cast<std::size_t>(T), 0.0);
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < H; ++h) {
      const auto cls = duplicate_classes(kp + static_cast<std::size_t>((b * H + h) * T) * row_bytes,
                                         T, row_bytes);
      for (std::int64_t c = 1; c < nc; ++c) {
        const std::int64_t unit = ((b * H + h) * nc + c);
        const std::int64_t held = std::min(T, c * chunk);
        long distinct = 0;
        for (std::int64_t t = 0; t < held; ++t) {
          if (rp[unit * T + t] == 0) continue;
          const auto q = static_cast<std::size_t>(cls[static_cast<std::size_t>(t)]);
          const double at = ap[unit * T + t];
          if (stamp[q] != unit) {
            stamp[q] = unit;
            class_alpha[q] = at;
            ++distinct;
          } else {
            ++out.duplicate_support_tokens;
            out.duplicate_alpha_spread =
                std::max(out.duplicate_alpha_spread, std::fabs(at - class_alpha[q]));
          }
        }
        out.distinct_per_head[static_cast<std::size_t>(h)] += static_cast<double>(distinct);
      }
    }
  }
  const double units =
      static_cast<double>(B) * static_cast<double>(std::max<std::int64_t>(1, nc - 1));
  for (double& v : out.distinct_per_head) v /= units;
  return out;
}

}  // namespace svattn::layers
