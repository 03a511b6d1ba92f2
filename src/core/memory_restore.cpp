// The screening bounds a memory hands to Memory::restore (docs/store.md "Persisted screening"):
// per-token lower bounds of the KKT gradient, which let a restore skip the kernel work on reserve
// tokens whose bound is conclusive.
#include <algorithm>
#include <string>

#include "memory_impl.h"
#include "svattn/errors.h"

namespace svattn {

std::vector<double> Memory::gradient_lower_bounds() const {
  const Impl& m = *impl_;
  std::vector<double> out;
  if (m.num_tokens == 0 || m.status != Status::kOptimal || m.warmup) return out;
  std::vector<int> sl;
  sl.reserve(static_cast<size_t>(m.num_tokens));
  m.buckets.for_each_slot([&](int s) { sl.push_back(s); });  // ascending id
  out.reserve(sl.size());
  for (int s : sl) {
    const bool reserve = m.set_of[s] == Impl::Set::kReserve && m.alpha[s] == 0.0;
    out.push_back(reserve ? m.gradient_lower_bound(s) : 0.0);
  }
  return out;
}

std::vector<double> Memory::gradient_lower_bounds(const std::vector<TokenId>& ids) const {
  const Impl& m = *impl_;
  std::vector<double> out;
  if (m.num_tokens == 0 || m.status != Status::kOptimal || m.warmup) return out;
  out.reserve(ids.size());
  for (TokenId id : ids) {
    const auto it = m.slot_of.find(id);
    if (it == m.slot_of.end()) {
      throw NotFound("gradient_lower_bounds: the memory holds no token " +
                            std::to_string(id));
    }
    const int s = it->second;
    const bool reserve = m.set_of[s] == Impl::Set::kReserve && m.alpha[s] == 0.0;
    out.push_back(reserve ? m.gradient_lower_bound(s) : 0.0);
  }
  return out;
}

}  // namespace svattn
