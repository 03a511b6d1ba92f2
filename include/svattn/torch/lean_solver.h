// The exact path's training solver (docs/layers.md §1 "The lean solver"): the incremental
// Cauwenberghs–Poggio solve of one growing token set (docs/math.md §4) on preallocated workspaces,
// without the audit machinery of svattn::Memory (no canonical refinement, no state hash, no
// screening bounds: every gradient is tracked exactly on a dense Gram matrix, which at the sizes a
// training step holds — a few hundred tokens — costs less than bounding it). fp64 throughout; the
// kernel values are the core's (svattn::kernel), R the core's bordered inverse. A memory that
// leaves warm-up off the point n C = 1 or whose path gives up is finished by the core's batch
// solver (svattn::solve_batch), counted in fallbacks().
//
// Tokens are added in ascending id and kept in that order; the solution after every add() is the
// optimum of docs/math.md §1 on the tokens held (the same partition as svattn::Memory on the same
// tokens; tests/torch/test_lean_solver.cpp).
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <memory>
#include <vector>

#include "svattn/types.h"

namespace svattn::layers {

/// A token's set (docs/math.md §2). In warm-up every token is listed as error (a = 1/n).
enum class LeanSet : std::uint8_t { kMargin = 1, kError = 2, kReserve = 0 };

class LeanSolver {
 public:
  LeanSolver();
  ~LeanSolver();
  LeanSolver(LeanSolver&&) noexcept;
  LeanSolver& operator=(LeanSolver&&) noexcept;

  /// Empties the solver for a new problem (RBF kernel only; problem.kernel.bandwidth is sigma) on
  /// keys of dimension `dim`, with room for `capacity` tokens (it grows past it if needed). The
  /// workspaces of earlier problems are kept. Throws InvalidArgument on a non-RBF kernel or dim < 1.
  void reset(const ProblemSettings& problem, int dim, int capacity);
  /// Adds `count` tokens with ids id0, id0 + 1, ... (above every id held) and keys `keys` (count
  /// rows of dim, row-major), one at a time along the path.
  void add(const double* keys, TokenId id0, int count);
  /// Drops every reserve token (the bounded memory's eviction; nothing in warm-up).
  void evict_reserve();

  int size() const;
  bool warmup() const;
  Status status() const;
  /// b of docs/math.md §2; with S = ∅ the canonical midpoint of its feasible interval (§3 step 5),
  /// in warm-up -max_i h_i (§1).
  double b() const;
  /// Per token in ascending id (index 0 .. size() - 1).
  TokenId id(int i) const;
  double alpha(int i) const;
  LeanSet set(int i) const;
  const double* key(int i) const;
  /// Margin tokens (indices as above) in the row order of bordered_inverse() (row k + 1).
  const std::vector<int>& margin_order() const;
  /// Inverse of [[0, 1'], [1, K_SS + mu I]] over margin_order() (empty when S = ∅ or warm-up).
  Eigen::Block<const Eigen::MatrixXd> bordered_inverse() const;

  /// Path events over the solver's life since reset() (docs/math.md §4).
  long events() const;
  /// Adds finished by the core's batch solver (a path that gave up or an entrant the Schur guard
  /// refused; the warm-up exit off n C = 1 is not counted).
  long fallbacks() const;
  /// The state in the core's form (ids ascending, alpha, b, partition, status, warm-up; no hash),
  /// for the verifier (svattn::verify_state) and the tests.
  State state(int value_dim) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace svattn::layers
