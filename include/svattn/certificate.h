// Deletion certificates and the independent verifier (SPEC §5).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svattn/batch_solver.h"
#include "svattn/memory.h"

namespace svattn {

/// Result of checking a stored state against its tokens without trusting the solver that made it.
struct VerifyReport {
  bool feasible = false;  ///< sum(a) = 1 within tol, 0 <= a <= C, a_R = 0, a_E = C
  bool kkt_ok = false;    ///< sign conditions of g on every token within tolerance
  /// Optimum provably unique: ridge > 0, a strictly positive definite RBF kernel on distinct keys,
  /// or the warm-up point (n C <= 1, where the feasible set is the single point a_i = 1/n).
  /// Informational: ok() does not require it (a non-unique optimum can still be verified optimal).
  bool unique = false;
  bool hash_ok = false;  ///< recomputed canonical hash equals the stated one
  std::string uniqueness_reason;
  /// Set when the state cannot be checked against these tokens at all (sizes differ, or the state's
  /// ids are not the tokens' ids in ascending order); every flag is then false.
  std::string error;
  KktReport kkt;
  /// Filled when resolve = true: batch re-solve on the same tokens.
  bool resolved = false;
  bool resolve_hash_equal = false;
  bool resolve_partition_equal = false;
  double resolve_max_abs_dalpha = 0;
  std::string resolve_sha256;
  bool ok() const { return feasible && kkt_ok && hash_ok && (!resolved || resolve_hash_equal); }
};

/// O(n |S ∪ E| d): recomputes g for every token from the keys and the stated a, b.
VerifyReport verify_state(const TokenSet& tokens, const State& state, const Tolerances& tol,
                          bool resolve);

/// Certificate of removing `removed` from a memory whose canonical state was `before`.
/// `after_memory` is the memory after the removal; `diag` the removal's diagnostics. When `check`
/// is true a batch re-solve on the remaining tokens is compared (hash, partition, max |da|, max
/// |d readout| on `probes`). `record_id` may be empty.
nlohmann::json removal_certificate(const State& before, const Memory& after_memory,
                                   const std::vector<TokenId>& removed,
                                   const std::string& record_id, const OpDiagnostics& diag,
                                   bool check, const RowMatrix& probes);

}  // namespace svattn
