// Canonical refinement (docs/math.md §4): from any approximate optimum, re-derive the partition and
// solve the KKT system on (S, E) in ascending token-id order with a row-wise Cholesky whose sums
// follow the fixed lane order (fixed_sum.h, vector or scalar: the same bits). Two paths that reach
// the same partition produce the same bits. Internal header.
#pragma once
#include <cstdint>
#include <vector>

#include "svattn/types.h"

namespace svattn::detail {

enum class Set : std::uint8_t { kMargin = 0, kError = 1, kReserve = 2 };

/// Kernel values of a token collection held in slots (some slots may be inactive). Kernel values
/// K(i, j) are read by rows restricted to "required" columns j: call require(j) for every column
/// needed before taking row pointers (require may invalidate them).
class KernelAccess {
 public:
  virtual ~KernelAccess() = default;
  virtual int num_slots() const = 0;
  virtual bool active(int slot) const = 0;
  virtual TokenId id(int slot) const = 0;
  /// K_ii (no ridge).
  virtual double diag(int slot) const = 0;
  /// The active() flags as one array (nonzero: active), or nullptr when every slot is active; and
  /// the diag() values as one array. The refinement's pass over all slots reads these.
  virtual const char* live_flags() const = 0;
  virtual const double* diag_values() const = 0;
  /// Makes K(:, j) addressable at position pos(j) of every row.
  virtual void require(int j) = 0;
  virtual int pos(int j) const = 0;
  /// K(i, .) by position; valid until the next require().
  virtual const double* row(int i) = 0;
  /// A fresh kernel value (used in warm-up, where every token is in the support).
  virtual double kernel_value(int i, int j) const = 0;
};

/// Row-wise Cholesky factor of Q_SS = K_SS + mu I in ascending-id order. Entry j of a row depends
/// only on the token's kernel values and rows < j + 1, so a factor of a common prefix is reused
/// bit-identically, and so are the first entries of the later rows: after the first position p
/// where the token order changed, a token that had a row keeps its entries j < p (docs/math.md §3
/// "Vector lanes, same bits").
struct CholeskyCache {
  std::vector<TokenId> order;
  std::vector<std::vector<double>> rows;  // rows[i] has i + 1 entries (its position when computed)
  /// Rows [0, complete) are rows of the current factor; rows from `complete` on hold only their
  /// first `complete` entries (an earlier row was dropped since they were computed).
  std::size_t complete = 0;
  double shift = 0;  // the 11' shift the rows were computed with
  /// Drops the row of `id` (call when a token is removed); later rows keep their entries before it.
  void invalidate_from(TokenId id);
  void clear() {
    order.clear();
    rows.clear();
    complete = 0;
  }
};

/// Reuse of the first entries of rows past the common prefix (CholeskyCache); on by default.
/// Switched off, the factor recomputes every such row whole (same bits; the benchmark's A/B).
extern bool g_reuse_row_prefixes;
/// Factor entries taken over from earlier rows past the common prefix, on this thread (tests).
std::uint64_t reused_row_entries();

struct CanonicalResult {
  std::vector<double> alpha;  ///< per slot (0 for reserve and inactive slots)
  std::vector<double> g;      ///< per slot; g_i = ((K + mu I) a)_i - K_ii / 2 + b
  std::vector<Set> set;       ///< per slot
  std::vector<int> margin;    ///< slots, ascending id
  std::vector<int> error;     ///< slots, ascending id
  double b = 0;
  KktReport kkt;
  Status status = Status::kEmpty;
  bool warmup = false;
  int repairs = 0;            ///< partition changes after the initial thresholding
  bool screened = false;      ///< the skip list was honoured (skipped slots' g not computed)
};

/// skip (optional, per slot): reserve/error tokens whose KKT sign the caller has proved by a bound;
/// their g is neither computed nor checked (left as is in the result). Ignored in warm-up and
/// when the margin set is empty (res.screened tells).
/// alpha_guess: per slot, from any path. The initial partition is read off it by the alpha
/// thresholds; violations are then repaired until the KKT conditions hold on every token.
CanonicalResult canonicalize(KernelAccess& ka, const std::vector<double>& alpha_guess,
                             const ProblemSettings& problem, const Tolerances& tol,
                             CholeskyCache* cache, const std::vector<char>* skip = nullptr);

/// True when n*C <= 1 (+1e-9 slack for rounding): the warm-up regime of docs/math.md §1.
bool is_warmup(int n, double C);
/// Ridge 0: a reserve token whose gradient exceeds this limit (scale = max(1, max_i K_ii)) has no
/// kernel twin in the support (docs/math.md §1, "μ = 0 and duplicates"); the duplicate check reads
/// the rows of the others only.
double twin_gradient_limit(double scale, const Tolerances& tol, double C);
/// true (default): the duplicate check skips reserve tokens above twin_gradient_limit; false: it
/// reads every token's row (the check before; tests compare the two).
extern bool g_twin_filter;
/// Ridge 0: whether a token of `support` or of `reserve` (slots) is a kernel twin of a support
/// token that can trade mass with it (the check behind Status::kSingular).
bool has_tradable_duplicate(KernelAccess& ka, const std::vector<int>& support,
                            const std::vector<int>& reserve, const CanonicalResult& res);

}  // namespace svattn::detail

namespace svattn::detail {

/// Assembles the public State (with hash) from per-row arrays; `tokens` must be sorted by
/// ascending id and alpha/set aligned with its rows.
State build_state(const ProblemSettings& p, const TokenSet& tokens, const std::vector<double>& alpha,
                  const std::vector<Set>& set, double b, const KktReport& kkt, Status status,
                  bool warmup);
/// The same without the hash (state_sha256 left empty), for holders that hash their own rows.
State build_state_unhashed(const ProblemSettings& p, std::vector<TokenId> ids, int dim,
                           int value_dim, std::vector<double> alpha,
                           const std::vector<Set>& set, double b, const KktReport& kkt,
                           Status status, bool warmup);

}  // namespace svattn::detail
