// Memory::Impl, the state of the exact memory, shared by the files that implement it (internal):
//   memory.cpp            public API, one add / remove and its finish (warm-up, fallbacks)
//   memory_slots.cpp      token slots (keys, values, coefficients, gradients) and the column cache
//   memory_bordered.cpp   margin-set changes on the bordered inverse R (docs/math.md §4)
//   memory_screening.cpp  the rigorous screening bounds of reserve gradients (drift, spread) and
//                         the slack index over them (slack_index.h; docs/math.md §4,
//                         "Screened KKT checks")
//   memory_path.cpp       the Cauwenberghs–Poggio path, in named steps
//   memory_canonical.cpp  the canonical refinement after a partition change and batch repairs
#pragma once
#include <chrono>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "bordered_inverse.h"
#include "canonical.h"
#include "slack_index.h"
#include "support_columns.h"
#include "token_buckets.h"
#include "svattn/kernel.h"
#include "svattn/memory.h"
#include "svattn/readout.h"

namespace svattn {

namespace detail {
using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace detail

namespace detail {
/// Screening of reserve gradients: true (default) counts the offset b exactly (g_i moves by db);
/// false is the looser bound that adds |db| to the drift (docs/math.md §4). Bench A/B and tests only.
extern bool g_exact_offset_screening;
/// Screening candidates from the slack index (true, default) or from a scan of every slot (false,
/// a simpler bookkeeping with the same bound, bench A/B only). Both flags are read
/// when a memory is constructed and fixed for its life.
extern bool g_slack_index;
/// true (default): an operation's path length in `drift` is replaced by its net displacement at
/// the end of the walk (docs/math.md §4); false: the path length stays (bench A/B and tests).
extern bool g_net_displacement;
/// true (default): tokens the drift bound cannot clear are tested by the spread bound before an
/// exact recomputation (docs/math.md §4); false: the drift bound alone (bench A/B and tests).
extern bool g_spread_bound;
/// A slack-index query that visits more than 1 in g_slack_scan_share live tokens makes the next
/// query a scan of the keys (read when a memory is constructed; bench A/B of the switch point).
extern long g_slack_scan_share;
/// Tokens the spread bound proved safe (over the process; tests check that it is exercised).
extern long g_spread_cleared;
}  // namespace detail

struct Memory::Impl final : detail::KernelAccess {
  using Set = detail::Set;
  using Clock = detail::Clock;

  MemorySettings settings;
  int key_dim = 0, value_dim = 0;

  // ---------------------------------------------------------------- token slots
  int slot_capacity = 0;
  int slots_used = 0;                // slots [0, slots_used) have been handed out
  int num_tokens = 0;                // live tokens
  std::vector<double> keys, values;  // slot s: key_dim (value_dim) entries from s * key_dim
  std::vector<TokenId> ids;
  std::vector<char> live;
  std::vector<double> kdiag;  // K_ss (no ridge)
  std::vector<double> alpha;  // a_s
  std::vector<double> grad;   // g_s = ((K + mu I) a)_s - K_ss / 2 + b (exact or screened)
  std::vector<Set> set_of;    // margin / error / reserve
  std::vector<int> free_slots;
  std::unordered_map<TokenId, int> slot_of;
  // The live slots in ascending id, grouped in hash buckets with cached digests (the state hash).
  detail::TokenBuckets buckets;
  // Kernel columns K(:, j) for the support and the moving token, stored row-major.
  detail::SupportColumns columns;

  // ---------------------------------------------------------------- path state
  std::vector<int> margin;           // margin slots in the order of `bordered` (k -> row k + 1)
  detail::BorderedInverse bordered;  // inverse of [[0, 1'], [1, Q_SS]]; empty when S is empty
  double b = 0;
  Status status = Status::kEmpty;
  bool warmup = false;
  bool needs_batch = false;  // the path gave up: finish by a batch re-solve
  detail::CholeskyCache cholesky;
  std::vector<int> support_by_id;  // S ∪ E slots, ascending id
  KktReport kkt;                   // residuals of the last canonical refinement
  int ops_since_refactor = 0;

  // ---------------------------------------------------------------- screening
  // docs/math.md §4 "Screened KKT checks". Every move of w = sum_j a_j phi_j adds a bound on
  // |<phi_i, dw>| to `drift`; the offset b moves every gradient by exactly db. A reserve token
  // whose gradient was grad_i when drift and b were drift_at_refresh_i and b_at_refresh_i still has
  // g_i(now) >= screen_base_i + (b - b_at_refresh_i) - (drift - drift_at_refresh_i), where the
  // base is grad_i when it was last exact (or a bound the spread test proved). Tokens whose bound
  // stays positive need neither path updates nor canonical re-checks; only the others get their
  // gradient recomputed.
  //
  // The slack index (docs/math.md §4 "The slack index") orders the live reserve tokens by
  // k_i = screen_base_i - b_at_refresh_i + drift_at_refresh_i, so the tokens whose bound may fail
  // are the prefix k_i <= drift - b + round-off, found without visiting the others.
  //
  // Initialising the screening state from exact gradients (e.g. a restore from persisted
  // per-token gradients): for every live token set set_of[i], alpha[i] and grad[i] (the exact
  // g_i at the state's b), set `b`, then call mark_refreshed(i, b) for each reserve token (it
  // records drift_at_refresh_i = drift, b_at_refresh_i = b and indexes the token); drift may stay
  // 0. Setting grad, drift_at_refresh and b_at_refresh directly is allowed too, followed by one
  // rebuild_slack_index(); set screen_base = grad and spread_b = b_at_refresh with them, and leave
  // spread_s = inf (no spread snapshot; the first exact refresh takes one).
  // check_invariants() asserts that the index matches these arrays.
  std::vector<double> screen_base;  // the drift bound's base: grad_i when exact, or a proven
                                    // lower bound of g_i (rebase_screening)
  std::vector<double> drift_at_refresh;
  std::vector<double> b_at_refresh;  // the offset b at the base
  double drift = 0;
  double kmax = 0;                                       // max_i |K_ii| >= |K_ij|
  bool exact_offset = detail::g_exact_offset_screening;  // fixed at construction
  bool use_slack_index = detail::g_slack_index;          // fixed at construction
  bool use_spread = detail::g_spread_bound;               // fixed at construction
  detail::SlackIndex slack_index;
  std::vector<std::uint32_t> slack_version;  // per slot: version of its current index entry
  std::vector<double> slack_key_now;         // per slot: key of that entry (NaN: not indexed)
  double bref_absmax = 0;                    // >= |b_at_refresh_i| of every indexed token
  std::vector<detail::SlackIndex::Entry> slack_held;  // scratch of one query
  // A query that finds more than a few tokens below its threshold is cheaper as a scan of
  // slack_key_now (one branchless compare per slot) than as heap pops (a sift of log n levels
  // with unpredictable branches each, and a push per exact gradient): the next query scans after a
  // query that visited more than 1 in slack_scan_share tokens (docs/math.md §4 "The slack
  // index"; either way every token whose bound may fail is visited). While queries scan, the heap
  // is not kept; it is rebuilt from slack_key_now when they return to it (after
  // kSlackQuietScans quiet scans in a row).
  const long slack_scan_share = detail::g_slack_scan_share;  // fixed at construction
  bool slack_scan_next = false;
  static constexpr int kSlackQuietScans = 16;
  int slack_quiet_scans = 0;         // scans in a row that visited few
  std::vector<int> slack_scan_list;  // scratch of one scan: the slots listed at its threshold
  // The spread bound (docs/math.md §4 "The spread bound"), a second test for the tokens the
  // drift bound cannot clear. Every coefficient change moves the mass-conserving displacement; with
  // kappa_i, s_i the centre and half-range of token i's cached kernel values when its gradient was
  // last exact, a change da_j of a token whose column was then cached moves g_i by at most
  // s_i |da_j| (after the mass term), any other by r_i |da_j|. Global accumulators: move_l1 (sum of
  // |da_j|), move_mass (sum of |sum_j da_j| per change), move_log (|da_j| per column epoch, in
  // ascending epoch, so the movement of columns younger than a row is one suffix sum).
  struct MoveEntry {
    std::uint64_t epoch;
    double amount;
  };
  std::vector<double> spread_s, spread_kappa;  // per slot (s = inf: no cached values)
  std::vector<double> spread_b;                // the offset b when grad_i was last exact
  std::vector<double> spread_l1, spread_mass, spread_young;  // accumulators at the snapshot
  std::vector<std::uint64_t> spread_epoch;                   // row epoch at the snapshot
  double move_l1 = 0, move_mass = 0;
  std::vector<MoveEntry> move_log;
  // The snapshot costs a scan of the token's row at every exact gradient; it pays only where the
  // bound then clears tokens (removals from a restored memory), not on a stream of adds, where it
  // clears almost none. So it is adaptive (docs/math.md §4 "The spread bound"): per window of
  // kSpreadWindow snapshots taken, the clears per snapshot decide whether the next window takes
  // every snapshot or one in kSpreadSample exact gradients (which keeps measuring the rate). A
  // token without a snapshot has spread_s = inf (the bound is off for it), so either choice is
  // sound; the state never depends on it.
  static constexpr long kSpreadWindow = 256, kSpreadSample = 64, kSpreadPayoff = 8;
  bool spread_every = true;  // this window takes every snapshot
  long spread_decisions = 0, spread_taken = 0;
  // Tokens that stayed screened in this window because of the spread bound (a proof at the start
  // of a step that the end-of-step test then loses does not count: the token is recomputed).
  long spread_hits = 0;
  mutable std::vector<double> move_suffix_sums;  // move_suffix_sums[k] = sum of amounts from k on
  mutable bool move_dirty = false;
  // The path's current support as dense weights over the column positions (load_support).
  std::vector<double> weights_dense, beta_dense;
  int weights_end = 0;
  // Per-slot scratch of a path walk (PathWalk), sized with the slots and reset by the walk on the
  // entries it touched, so a walk costs no O(n) allocation.
  std::vector<char> walk_refused, walk_exact, walk_marked;
  std::vector<double> walk_gamma;

  // ---------------------------------------------------------------- life and diagnostics
  OpDiagnostics totals;
  std::uint64_t evicted = 0;    // tokens evicted over the memory's life (Memory::evictions)
  long kernel_evaluations = 0;  // kernel values filled by row_ready
  long kernel_evaluations_mark = 0;

  // Caches of the public views (invalidated on every change).
  mutable bool support_valid = false;
  mutable Support support_cache;
  mutable bool state_valid = false;
  mutable State state_cache;

  // ---------------------------------------------------------------- KernelAccess
  int num_slots() const override { return slots_used; }
  bool active(int s) const override { return live[s] != 0; }
  TokenId id(int s) const override { return ids[s]; }
  double diag(int s) const override { return kdiag[s]; }
  const char* live_flags() const override { return live.data(); }
  const double* diag_values() const override { return kdiag.data(); }
  void require(int j) override { ensure_column(j); }
  int pos(int j) const override { return columns.pos(j); }
  const double* row(int i) override { return row_ready(i); }
  double kernel_value(int i, int j) const override { return kernel_at(i, j); }

  const double* key(int s) const { return keys.data() + static_cast<size_t>(s) * key_dim; }
  const double* value(int s) const { return values.data() + static_cast<size_t>(s) * value_dim; }
  double kernel_at(int a, int c) const {
    return kernel(settings.problem.kernel, key(a), key(c), key_dim);
  }
  double q_at(int a, int c) const {
    return kernel_at(a, c) + (a == c ? settings.problem.ridge : 0.0);
  }
  void invalidate_views() {
    support_valid = false;
    state_valid = false;
  }
  void ensure_column(int s) { columns.add_lazy(s); }
  void drop_column(int s) { columns.release(s); }
  // K(i, .) over the support columns, computing entries of columns added since row i was read.
  const double* row_ready(int i) {
    return columns.ready_row(i, [&](int p) {
      ++kernel_evaluations;
      return kernel_at(i, columns.slot_at(p));
    });
  }

  // ---------------------------------------------------------------- memory.cpp
  Clock::time_point begin_op();
  OpDiagnostics close_op(OpDiagnostics& dg, Clock::time_point t0);
  void evict_if_bounded(OpDiagnostics& dg, std::vector<TokenId>* out);
  bool offset_follows_reserve() const;
  bool add_one(TokenId id, const double* k, const double* v, OpDiagnostics& dg);
  bool remove_one(int c, OpDiagnostics& dg);
  void finalize(bool changed, OpDiagnostics& dg);
  void reset_to_empty();

  // ---------------------------------------------------------------- memory_slots.cpp
  /// Room for `need` slots: doubling (amortised adds), or exactly `need` (a restore knows n).
  void grow(int need, bool exact = false);
  int insert_token(TokenId id, const double* k, const double* v);
  void erase_token(int s);
  TokenSet tokens_sorted() const;
  void refresh_support();
  void trim_columns();
  const Support& support() const;

  // ---------------------------------------------------------------- memory_bordered.cpp
  void refactor();
  Eigen::VectorXd beta_of(int c);
  double schur(int i, Eigen::VectorXd* beta_i);
  void expand(int i);
  void contract(int k);
  bool contract_slot(int s);

  // ---------------------------------------------------------------- memory_screening.cpp
  bool reserve_safe(int i, double extra, double b_then) const;
  double offset_drift(double db) const;
  void mark_refreshed(int i, double b_now);
  double slack_key(int i) const;
  void screen_touch(int i);
  void rebuild_slack_index();
  double screen_limit(double extra0, double b0, double extra1, double b1) const;
  void check_slack_index() const;
  void spread_snapshot(int i);
  bool spread_take();
  void record_move(int j, double amount);
  void compact_move_log();
  double young_movement(std::uint64_t epoch) const;
  double spread_loss(int i, double step_l1, double step_mass) const;
  bool spread_safe(int i, double step_l1, double step_mass, double b_then,
                   double* lower = nullptr) const;
  void rebase_screening(int i, double lower);
  // Calls visit(i) for every live reserve token whose bound may fail at the threshold
  // limit() (screen_limit; re-read after every visit, it may only shrink), in ascending key
  // order; with the index off, for every live reserve token in slot order. visit may refresh
  // tokens (mark_refreshed) but must not start another query.
  template <typename Limit, typename Visit>
  void for_each_screen_candidate(Limit&& limit, Visit&& visit);
  void load_support(int c, const std::vector<int>& elist);
  double exact_g(int i);
  void refresh(int i, OpDiagnostics& dg);
  double gradient_lower_bound(int i) const;
  void seed_gradient_bound(int i, double lower);

  // ---------------------------------------------------------------- memory_path.cpp
  double gradient_of_new(int c);
  bool path(int c, int dir, OpDiagnostics& dg);
  struct PathWalk;

  // ---------------------------------------------------------------- memory_canonical.cpp
  detail::CanonicalResult timed_canonicalize(const std::vector<double>& guess,
                                             const std::vector<char>* skip, OpDiagnostics& dg);
  void set_from_canonical(const detail::CanonicalResult& res, const std::vector<char>* skip);
  void finish(OpDiagnostics& dg);
  bool screened_twin(const detail::CanonicalResult& res, const std::vector<char>& skip,
                     double extra);
  void rebuild_margin(bool force, OpDiagnostics& dg);
  void batch_rebuild(OpDiagnostics& dg, bool boundary = false);
};

template <typename Limit, typename Visit>
void Memory::Impl::for_each_screen_candidate(Limit&& limit, Visit&& visit) {
  if (!use_slack_index) {
    for (int i = 0; i < slots_used; ++i)
      if (live[i] && set_of[i] == Set::kReserve) visit(i);
    return;
  }
  if (slack_index.size() > 2 * static_cast<std::size_t>(num_tokens) + 4096) rebuild_slack_index();
  long visited = 0;
  if (slack_scan_next) {
    // The same candidates by a scan of the keys (in slot order; the threshold only shrinks, so
    // a token skipped at a smaller threshold than the heap would have seen is still proven). The
    // keys at or below the first threshold are listed without a branch per slot (which side of
    // the threshold a key falls is unpredictable), then visited if still below the current one; a
    // visit changes no other token's key.
    double lim = limit();
    slack_scan_list.resize(static_cast<std::size_t>(slots_used));
    int* list = slack_scan_list.data();
    std::size_t listed = 0;
    for (int i = 0; i < slots_used; ++i) {
      const double k = slack_key_now[i];  // NaN (never listed) unless a live reserve token
      list[listed] = i;
      listed += (k - 1e-14 * std::abs(k) <= lim) ? 1 : 0;
    }
    for (std::size_t q = 0; q < listed; ++q) {
      const int i = list[q];
      const double k = slack_key_now[i];
      if (!(k - 1e-14 * std::abs(k) <= lim)) continue;
      ++visited;
      visit(i);
      lim = limit();
    }
  } else {
    slack_index.flush();
    slack_held.clear();
    detail::SlackIndex::Entry e;
    while (slack_index.pop_below(limit(), &e)) {
      if (e.version != slack_version[e.slot]) continue;  // stale: the token changed since
      slack_held.push_back(e);
      ++visited;
      visit(e.slot);
    }
    // Entries whose token was not refreshed go back; refreshed ones pushed their new entry.
    for (const detail::SlackIndex::Entry& h : slack_held)
      if (h.version == slack_version[h.slot]) slack_index.push(h);
    slack_index.flush();
  }
  // The next query scans when this one visited more than 1 in slack_scan_share tokens: a heap pop
  // and push-back per candidate then cost more than reading every key once.
  // Scans return to the heap only after kSlackQuietScans scans in a row visited few: the heap's
  // rebuild costs O(n) sifts, and one quiet query between busy ones (the canonical finish after a
  // walk) would otherwise rebuild it at every operation.
  const bool busy = visited * slack_scan_share > num_tokens;
  slack_quiet_scans = busy || !slack_scan_next ? 0 : slack_quiet_scans + 1;
  const bool scan = busy || (slack_scan_next && slack_quiet_scans < kSlackQuietScans);
  if (slack_scan_next && !scan) rebuild_slack_index();  // scans do not keep the heap
  slack_scan_next = scan;
}

}  // namespace svattn
