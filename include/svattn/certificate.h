// Deletion certificates and the independent verifier (docs/math.md §7, docs/api.md "Certificates").
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "svattn/batch_solver.h"
#include "svattn/memory.h"

namespace svattn {

/// Result of checking a stored state against its tokens without trusting the solver that made it.
/// An empty token set (n = 0) has one state, the empty state: no ids, b = 0, status `empty`; it is
/// feasible, KKT-optimal and unique by definition and verifies when its hash is the recomputed
/// hash of the empty canonical layout (docs/math.md "The empty memory").
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

/// O(n |S ∪ E| d): recomputes g for every token from the keys and the stated a, b. n = 0 and n = 1
/// are ordinary inputs.
VerifyReport verify_state(const TokenSet& tokens, const State& state, const Tolerances& tol,
                          bool resolve);

// ------------------------------------------------------------------------------ certificates

/// Sizes and hash of a state as a certificate reports them (JSON "before" / "after").
struct StateSummary {
  std::size_t n = 0;
  std::size_t margin = 0;
  std::size_t error = 0;
  std::size_t reserve = 0;
  std::string state_sha256;
  /// "after" only (JSON: status, kkt).
  Status status = Status::kEmpty;
  KktReport kkt;
};
StateSummary summarize(const State& s);
/// Inverse of to_string(Status); throws FormatError naming the unknown text.
Status status_from_string(const std::string& s);

/// Which argument the optimality check of a certificate used (JSON "verify.argument").
enum class CertificateArgument {
  kNone,       ///< no optimality check ran
  kFull,       ///< O(n |S ∪ E| d) check of every remaining token from the tokens alone
  kReference,  ///< every removed token had a = 0 and no coefficient moved: the remaining KKT
               ///< conditions are those of the previous state, whose hash the audit chain holds
};
std::string to_string(CertificateArgument a);
CertificateArgument certificate_argument_from_string(const std::string& s);

/// The optimality check after removal (JSON "verify").
struct OptimalityCheck {
  bool performed = false;
  CertificateArgument argument = CertificateArgument::kNone;
  /// The checks that ran, in order, e.g. feasibility, kkt_signs, uniqueness, hash (kFull) or
  /// removed_alpha_zero, coefficients_unchanged, hash (kReference).
  std::vector<std::string> checks;
  bool feasible = false;
  bool kkt_ok = false;
  double max_kkt_violation = 0;
  bool unique = false;
  std::string uniqueness_reason;
  bool hash_ok = false;
  /// kReference: the state the argument refers to (= the certificate's before.state_sha256).
  std::string reference_sha256;
  /// kReference computed from the stored rows without restoring the memory: the coefficients
  /// from the stored support, the hashes from the persisted bucket digests, whose state hash before
  /// was checked equal to the recorded one (docs/store.md "Forget without a restore"). JSON
  /// "from_stored_rows", absent in older certificates (false).
  bool from_stored_rows = false;
  std::string note;  ///< when not performed: how to check independently
  bool ok() const { return performed && feasible && kkt_ok && hash_ok; }
};

/// The from-scratch re-solve comparison (JSON "check"), opt-in (`--resolve`).
struct ResolveCheck {
  bool performed = false;
  std::string retrained_sha256;
  bool hash_equal = false;
  bool partition_equal = false;
  double max_abs_dalpha = 0;
  double max_abs_ddecision = 0;
  double max_abs_dreadout = 0;
  std::int64_t probes = 0;
  double retrain_seconds = 0;
};

/// Where a store erased the record (JSON "store"); absent for certificates made outside a store.
struct StoreErasure {
  std::string path;
  std::string memory;
  std::int64_t record = 0;
  bool record_was_suspended = false;
  std::int64_t token_rows_erased = 0;
  std::int64_t tokens_removed_from_memory = 0;
  bool secure_delete = true;
  /// "aes-256-gcm": the record's payload was encrypted under its own data key (docs/store.md
  /// "Encryption at rest"); "none": a plaintext store. Absent in older certificates ("none").
  std::string encryption = "none";
  /// Encrypted store: the id of the record's data key in STORE.keys and
  /// SHA-256("svattn-keyhash-v1" | id | stored key bytes), never the key (docs/store.md "Erasure
  /// by key destruction"). Empty for a plaintext record.
  std::string data_key_id;
  std::string data_key_sha256;
  /// The data key has been destroyed. false in the audit entry of the forget (the key is destroyed
  /// right after that entry commits and the destruction is logged by a following "shred" entry);
  /// true in the certificate the forget returns once the key is gone.
  bool data_key_destroyed = false;
  /// The record's bounds group (docs/store.md "Bounds groups"; schema 6): its screening bounds were
  /// kept in that group's blob, which the forget rewrote without them. -1 (and absent from the
  /// JSON) when the record had none (an older store).
  std::int64_t bounds_group = -1;
  /// Encrypted store: the group's key that sealed the record's bounds, replaced by a fresh key in
  /// the forget and destroyed with the data key (id and SHA-256 as for the data key). Empty for a
  /// plaintext store.
  std::string bounds_key_id;
  std::string bounds_key_sha256;
  /// As data_key_destroyed, for that group key.
  bool bounds_key_destroyed = false;
  /// What the erasure rests on where the store's own deletion does not remove the bytes: on
  /// PostgreSQL deleted rows stay in the server's files until VACUUM, which does not zero freed
  /// space, so erasure rests on the data key's destruction (docs/store.md "PostgreSQL"). Empty
  /// (and absent from the JSON) for an SQLite file, whose freed pages are zeroed.
  std::string erasure_basis;
};

/// A removal certificate (docs/api.md "Certificates"). to_json/from_json round-trip every field
/// (doubles exactly); the JSON field names are the v1 names.
struct RemovalCertificate {
  std::string certificate = "svattn-removal-v1";
  MemoryMode mode = MemoryMode::kAudit;
  ProblemSettings settings;
  std::string record_id;
  std::vector<TokenId> removed_ids;  ///< ascending
  StateSummary before;
  StateSummary after;
  OpDiagnostics solver;  ///< the removal's diagnostics (ops is not serialized)
  std::uint64_t evictions = 0;
  OptimalityCheck verify;
  ResolveCheck check;
  std::optional<StoreErasure> store;
  std::string scope;
  std::string limits;

  nlohmann::json to_json() const;
  /// Throws FormatError naming the missing or mistyped field.
  static RemovalCertificate from_json(const nlohmann::json& j);
  bool operator==(const RemovalCertificate& o) const { return to_json() == o.to_json(); }
};

/// What a removal certificate computes.
struct CertificateOptions {
  /// The independent optimality check of the state after removal (JSON "verify").
  bool optimality_check = true;
  /// Certify a removal that moved no coefficient by reference to the previous state (O(removed)
  /// plus one hash) instead of the O(n |S ∪ E| d) check.
  bool allow_reference = true;
  /// The from-scratch batch re-solve comparison (JSON "check"): one full solve.
  bool resolve = false;
};

/// Certificate of removing `removed` from a memory whose canonical state was `before`.
/// `after_memory` is the memory after the removal; `diag` the removal's diagnostics; readouts are
/// compared on `probes` when the re-solve runs. `record_id` may be empty. Removing every token is
/// an ordinary removal (the state after is the empty state).
RemovalCertificate removal_certificate(const State& before, const Memory& after_memory,
                                       const std::vector<TokenId>& removed,
                                       const std::string& record_id, const OpDiagnostics& diag,
                                       const CertificateOptions& options, const RowMatrix& probes);
/// A removal of tokens that all had alpha = 0, described from a stored state without the memory
/// at hand (a store that did not restore it; docs/store.md "Forget without a restore"). The caller
/// read the support (margin and error tokens) of the state before and checked that no removed id
/// is in it; `after.state_sha256` is the hash of the same support over the remaining tokens.
struct StoredReserveRemoval {
  MemorySettings settings;
  std::string record_id;
  std::vector<TokenId> removed_ids;
  StateSummary before;
  StateSummary after;
  /// The support of both states, ascending id: coefficients and whether each is an error token.
  std::vector<TokenId> support_ids;
  std::vector<double> support_alpha;
  std::vector<char> support_is_error;
};
/// Its certificate by reference (argument kReference): the coefficients, b and partition do not
/// change, so every remaining KKT condition is that of `before`; feasibility is checked on the
/// support (the reserve coefficients are 0 by construction), uniqueness needs ridge > 0 or
/// warm-up (otherwise it says it was not established: the keys were not read). O(|S u E|).
RemovalCertificate removal_certificate(const StoredReserveRemoval& removal);

/// Legacy form: check = true runs the full optimality check and the re-solve; false runs neither.
RemovalCertificate removal_certificate(const State& before, const Memory& after_memory,
                                       const std::vector<TokenId>& removed,
                                       const std::string& record_id, const OpDiagnostics& diag,
                                       bool check, const RowMatrix& probes);

}  // namespace svattn
