// The exact memory (docs/math.md §4–§7): incremental/decremental Cauwenberghs–Poggio path in fp64,
// followed after every operation that changes the partition by the canonical refinement, so that the
// state is a function of the token set alone: decrement(ingest(T), D) hashes like solve_batch(T \ D).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "svattn/types.h"

namespace svattn {

enum class MemoryMode {
  kAudit,    ///< every token kept: a deletion is exact relative to everything ever ingested
  kBounded,  ///< reserve tokens evicted as they appear (above token_budget); a deletion is exact
             ///< only relative to the retained tokens (docs/math.md §5)
};
std::string to_string(MemoryMode m);
MemoryMode memory_mode_from_string(const std::string& s);

struct MemorySettings {
  ProblemSettings problem;
  Tolerances tolerances;
  MemoryMode mode = MemoryMode::kAudit;
  /// Bounded mode only: reserve tokens are evicted only while size() > token_budget. 0 = always.
  std::size_t token_budget = 0;
  /// Operations between full refactorisations of the bordered inverse R. >= 1.
  int refactor_period = 256;
  /// Path steps allowed in one add/remove before it gives up the path and repairs by a batch solve
  /// (recorded as a repair in the diagnostics). >= 1.
  int max_steps_per_op = 20000;
  /// Schur-complement guard: an entrant j whose Schur complement is <= schur_tol * K_jj is refused
  /// from the margin set (near affine dependence) and the next event is selected. In (0, 1e-2).
  double schur_tol = 1e-12;

  void validate() const;
};

/// Diagnostics of one operation (or of a batch of them, summed).
struct OpDiagnostics {
  long ops = 0;         ///< tokens added/removed/evicted
  long events = 0;      ///< partition events taken by the path (S<->E, S<->R, entrant settles)
  long zero_steps = 0;  ///< events taken with a step of length 0 (ties, degenerate tokens)
  long refused_entrants = 0;  ///< Schur-guard refusals
  long refactorizations = 0;  ///< rebuilds of R from scratch (periodic or on invariant failure)
  long canonical_solves = 0;  ///< canonical refinements run
  long repairs = 0;           ///< canonical refinements that changed the path's partition
  long batch_fallbacks = 0;   ///< operations finished by a batch re-solve after the path failed
  long boundary_solves = 0;   ///< small batch solves on leaving warm-up (n*C crossing 1, docs/math.md §4)
  long tracked = 0;           ///< reserve tokens whose screening bound failed: gradient recomputed
  /// Kernel values K(i, j) computed by the exact path's column cache during the operation (lazily
  /// filled support columns of the rows that were read); the main cost driver of a removal at large
  /// n.
  long kernel_evaluations = 0;
  Status status = Status::kOptimal;
  double seconds = 0;            ///< wall time of the operation
  double canonical_seconds = 0;  ///< part of `seconds` spent in the canonical refinement

  OpDiagnostics& operator+=(const OpDiagnostics& o);
};

class Memory {
 public:
  Memory(const MemorySettings& settings, int dim, int value_dim);
  ~Memory();
  Memory(Memory&&) noexcept;
  Memory& operator=(Memory&&) noexcept;
  Memory(const Memory&);
  Memory& operator=(const Memory&);

  const MemorySettings& settings() const;
  int dim() const;
  int value_dim() const;
  int size() const;
  bool contains(TokenId id) const;

  /// Adds one token (throws AlreadyExists on a duplicate id, InvalidArgument on NaN/Inf or size).
  OpDiagnostics add(TokenId id, const Eigen::Ref<const Eigen::VectorXd>& key,
                    const Eigen::Ref<const Eigen::VectorXd>& value);
  /// Adds all tokens in the set's order (ids must all be new; checked before anything changes).
  /// Throws AlreadyExists, InvalidArgument on a dimension mismatch, and FormatError (from
  /// TokenSet::validate) on NaN/Inf entries or repeated ids.
  OpDiagnostics add_batch(const TokenSet& tokens);
  /// Removes one token (throws NotFound).
  OpDiagnostics remove(TokenId id);
  /// Removes all ids (all must be present; checked before anything changes).
  OpDiagnostics remove_batch(const std::vector<TokenId>& ids);
  /// Drops every reserve token (bounded mode does this after every operation: add, add_batch,
  /// remove, remove_batch). Readouts stay bit-identical. Returns the evicted ids, ascending; in
  /// warm-up (every token carries weight) nothing is evicted and `diag` is reset to zeros. Counted
  /// in evictions(): an audit-mode memory that was evicted from no longer certifies exactness
  /// relative to every token it ever saw (removal certificates say so).
  std::vector<TokenId> evict_reserve(OpDiagnostics* diag = nullptr);
  /// Tokens evicted over the life of the memory (evict_reserve and bounded mode), carried through
  /// serialize/deserialize (format version 2; a version-1 file reads as 0).
  std::uint64_t evictions() const;

  /// o(q) of docs/math.md §5 (support-weighted log-sum-exp for RBF). Size value_dim.
  Eigen::VectorXd readout(const Eigen::Ref<const Eigen::VectorXd>& q) const;
  /// f(q) = sum_j a_j k(q, x_j) - k(q, q)/2 + b. f >= 0 inside the description.
  double decision(const Eigen::Ref<const Eigen::VectorXd>& q) const;

  /// The canonical state (ids ascending) with its hash.
  State state() const;
  std::string state_sha256() const;
  /// All tokens held, ascending id.
  TokenSet tokens() const;
  /// The tokens with these ids, in the order given (throws NotFound naming a missing id).
  /// O(|ids| (d + dv)).
  TokenSet tokens(const std::vector<TokenId>& ids) const;
  double alpha(TokenId id) const;
  Status status() const;
  /// Diagnostics summed over the life of the memory.
  const OpDiagnostics& totals() const;

  /// Inverse of the bordered matrix [[0, 1'], [1, K_SS + mu I]] over the margin set, in the order
  /// of margin_order() (index 0 is the border). Reused by the layers' backward (docs/layers.md §1).
  const Eigen::MatrixXd& bordered_inverse() const;
  std::vector<TokenId> margin_order() const;

  /// Rebuilds a memory from its tokens and a canonical state produced for exactly these tokens and
  /// problem settings (e.g. loaded from a store) without re-running the path: caches and R are
  /// rebuilt from the partition (O(n |S u E| d + |S|^3)). The state is checked (ids, KKT on every
  /// token, hash); if it does not check, the memory is re-solved from scratch and `diag` (if given)
  /// records a batch fallback. Throws InvalidArgument if dimensions disagree or if the state was
  /// solved under other problem settings (state.settings != settings.problem: kernel, bandwidth,
  /// degree, coef0, C, ridge; the message names the field).
  ///
  /// With `hints` (gradient_lower_bounds() of the memory that produced `state`, aligned with
  /// tokens.ids), reserve tokens whose bound proves g_i > 0 are not re-checked: restoring costs the
  /// tokens' insertion, the hash, the KKT check of the support and of the tokens whose bound is not
  /// conclusive, and R (O(n d + |S u E|^2 d + |S|^3) when the bounds are tight). The caller must
  /// have checked the hints' integrity (docs/store.md "Persisted screening"); hints of the wrong
  /// length are ignored.
  static Memory restore(const MemorySettings& settings, const TokenSet& tokens, const State& state,
                        OpDiagnostics* diag = nullptr, const std::vector<double>* hints = nullptr);
  /// Lower bounds of the KKT gradient g_i = ((K + mu I) a)_i - K_ii / 2 + b of every token held,
  /// ascending id (0 for margin and error tokens, whose gradient restore always recomputes). Empty
  /// unless the memory is optimal and out of warm-up. O(n), no kernel value: the screening bounds
  /// the memory keeps (docs/math.md §4, "Screened KKT checks"). For Memory::restore.
  std::vector<double> gradient_lower_bounds() const;
  /// The same bounds for the tokens `ids` only, in the order given (O(|ids|)): a store rewriting
  /// the bounds of a few records (docs/store.md "Bounds groups"). Empty under the same conditions;
  /// NotFound naming the id when the memory does not hold one.
  std::vector<double> gradient_lower_bounds(const std::vector<TokenId>& ids) const;

  /// Versioned binary serialization with a SHA-256 checksum (docs/math.md).
  std::vector<std::uint8_t> serialize() const;
  static Memory deserialize(const std::vector<std::uint8_t>& bytes);
  void save(const std::string& path) const;
  static Memory load(const std::string& path);

  /// Checks internal invariants (R times bordered matrix = I within tolerance, caches equal fresh
  /// kernel values, partition consistent); throws via SVATTN_ASSERT. For tests.
  void check_invariants() const;

 private:
  struct Impl;
  // deserialize: the eviction count read from the file.
  void set_evictions(std::uint64_t count);
  std::unique_ptr<Impl> impl_;
};

}  // namespace svattn
