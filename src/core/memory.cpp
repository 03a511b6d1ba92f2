// Exact memory (docs/math.md §3-§4): the public Memory API and the outline of one
// operation. An add or remove moves the token's coefficient along the Cauwenberghs–Poggio path
// (memory_path.cpp), then the canonical refinement (memory_canonical.cpp) makes the state a
// function of the token set alone; warm-up (n C <= 1), its boundary and a path that gives up are
// finished by small batch solves. Memory::Impl and the files that implement it: memory_impl.h.
#include "svattn/memory.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "memory_impl.h"
#include "svattn/batch_solver.h"
#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/readout.h"

namespace svattn {

using detail::seconds_since;
using detail::Set;

// ------------------------------------------------------------------ one operation

// Starts a public operation: its clock and the diagnostics counters' marks.
Memory::Impl::Clock::time_point Memory::Impl::begin_op() {
  kernel_evaluations_mark = kernel_evaluations;
  return Clock::now();
}

// Common end of add/add_batch/remove_batch: bounded-mode eviction, status, timing, totals.
OpDiagnostics Memory::Impl::close_op(OpDiagnostics& dg, Clock::time_point t0) {
  evict_if_bounded(dg, nullptr);
  if (dg.status == Status::kOptimal) dg.status = status;
  dg.seconds = seconds_since(t0);
  dg.kernel_evaluations = kernel_evaluations - kernel_evaluations_mark;
  totals += dg;
  return dg;
}

void Memory::Impl::evict_if_bounded(OpDiagnostics& dg, std::vector<TokenId>* out) {
  if (settings.mode != MemoryMode::kBounded) return;
  std::vector<int> r;
  for (int i = 0; i < slots_used; ++i)
    if (live[i] && set_of[i] == Set::kReserve && !warmup) r.push_back(i);
  std::sort(r.begin(), r.end(), [&](int x, int y) { return ids[x] < ids[y]; });
  bool erased = false;
  for (int s : r) {
    if (settings.token_budget > 0 && static_cast<std::size_t>(num_tokens) <= settings.token_budget)
      break;
    if (out) out->push_back(ids[s]);
    erase_token(s);
    erased = true;
    ++evicted;
    ++dg.ops;
  }
  if (erased && offset_follows_reserve()) finalize(true, dg);
  invalidate_views();
}

// With the margin set empty only b is free, inside an interval whose lower end the reserve token
// nearest the boundary sets; the canonical state takes its midpoint (docs/math.md §3, "Canonical
// state"). Adding or removing a reserve token can move that end, so the canonical finish must
// re-derive b; with a margin set, b is fixed by the margin tokens and a reserve token moves nothing.
bool Memory::Impl::offset_follows_reserve() const {
  return margin.empty() && !warmup && status != Status::kEmpty && num_tokens > 0;
}

// Adds without the canonical finish (batched callers finish once).
bool Memory::Impl::add_one(TokenId id_, const double* k, const double* v, OpDiagnostics& dg) {
  const bool was_warm = num_tokens == 0 || detail::is_warmup(num_tokens, settings.problem.C) ||
                        status == Status::kEmpty;
  const int c = insert_token(id_, k, v);
  ++dg.ops;
  if (detail::is_warmup(num_tokens, settings.problem.C))
    return true;              // finish computes the warm-up point
  if (was_warm) return true;  // boundary: finish re-solves
  const double gc = gradient_of_new(c);
  grad[c] = gc;
  if (gc >= 0) {  // inside the description: a reserve token, no coefficient moves
    set_of[c] = Set::kReserve;
    mark_refreshed(c, b);  // its gradient is exact at the current (a, b)
    return offset_follows_reserve();
  }
  if (!path(c, +1, dg)) {
    dg.status = Status::kIterationLimit;
    needs_batch = true;
  }
  return true;
}

bool Memory::Impl::remove_one(int c, OpDiagnostics& dg) {
  ++dg.ops;
  const TokenId idc = ids[c];
  cholesky.invalidate_from(idc);
  const bool warm_after =
      num_tokens - 1 == 0 || detail::is_warmup(num_tokens - 1, settings.problem.C);
  if (set_of[c] == Set::kReserve && !warmup && !warm_after) {
    erase_token(c);  // a reserve token carries no weight: no coefficient moves
    return offset_follows_reserve();
  }
  if (warmup || warm_after || needs_batch) {
    if (set_of[c] == Set::kMargin) contract_slot(c);
    erase_token(c);
    needs_batch = needs_batch || (!warm_after);
    return true;
  }
  if (set_of[c] == Set::kMargin)
    SVATTN_ASSERT(contract_slot(c), "margin token missing from the path's margin list");
  set_of[c] = Set::kError;  // a free coefficient being lowered; not a margin token
  if (!path(c, -1, dg)) {
    dg.status = Status::kIterationLimit;
    needs_batch = true;
  }
  erase_token(c);
  refresh_support();
  return true;
}

// Every token removed: the state of a fresh memory (docs/math.md §3-§4: an erased
// memory hashes like a new one with the same settings).
void Memory::Impl::reset_to_empty() {
  margin.clear();
  bordered.clear();
  bordered.touch();
  support_by_id.clear();
  status = Status::kEmpty;
  warmup = false;
  needs_batch = false;
  b = 0;
  kkt = KktReport{};
  drift = 0;
  kmax = 0;
  cholesky.clear();
  invalidate_views();
}

void Memory::Impl::finalize(bool changed, OpDiagnostics& dg) {
  if (!changed) {
    invalidate_views();
    return;
  }
  const bool warm_now = num_tokens == 0 || detail::is_warmup(num_tokens, settings.problem.C);
  if (num_tokens == 0) {
    reset_to_empty();
    return;
  }
  if (needs_batch) {
    // The path hit its step cap: finish by a batch re-solve (recorded as a fallback).
    needs_batch = false;
    if (dg.status == Status::kIterationLimit) dg.status = Status::kOptimal;
    batch_rebuild(dg);
    return;
  }
  if (!warm_now && (warmup || status == Status::kEmpty)) {
    // Leaving warm-up: a small batch solve at the boundary (docs/math.md §4; n is about 1/C here).
    batch_rebuild(dg, /*boundary=*/true);
    return;
  }
  finish(dg);
}

// ------------------------------------------------------------------ public API

Memory::Memory(const MemorySettings& settings, int dim, int value_dim) : impl_(new Impl) {
  settings.validate();
  if (dim < 1) throw InvalidArgument("dim must be >= 1, got " + std::to_string(dim));
  if (value_dim < 1)
    throw InvalidArgument("value_dim must be >= 1, got " + std::to_string(value_dim));
  impl_->settings = settings;
  impl_->key_dim = dim;
  impl_->value_dim = value_dim;
}
Memory::~Memory() = default;
Memory::Memory(Memory&&) noexcept = default;
Memory& Memory::operator=(Memory&&) noexcept = default;
Memory::Memory(const Memory& o) : impl_(new Impl(*o.impl_)) {}
Memory& Memory::operator=(const Memory& o) {
  if (this != &o) impl_.reset(new Impl(*o.impl_));
  return *this;
}

const MemorySettings& Memory::settings() const { return impl_->settings; }
int Memory::dim() const { return impl_->key_dim; }
int Memory::value_dim() const { return impl_->value_dim; }
int Memory::size() const { return impl_->num_tokens; }
bool Memory::contains(TokenId id) const { return impl_->slot_of.count(id) != 0; }
Status Memory::status() const { return impl_->status; }
const OpDiagnostics& Memory::totals() const { return impl_->totals; }
std::uint64_t Memory::evictions() const { return impl_->evicted; }
void Memory::set_evictions(std::uint64_t count) { impl_->evicted = count; }

namespace {
void check_vec(const Eigen::Ref<const Eigen::VectorXd>& v, int want, const char* what, TokenId id) {
  if (v.size() != want)
    throw InvalidArgument(std::string(what) + " of token " + std::to_string(id) + " has size " +
                          std::to_string(v.size()) + ", expected " + std::to_string(want));
  for (Eigen::Index k = 0; k < v.size(); ++k)
    if (!std::isfinite(v[k]))
      throw InvalidArgument(std::string(what) + " of token " + std::to_string(id) +
                            " has a non-finite entry at column " + std::to_string(k));
}
}  // namespace

OpDiagnostics Memory::add(TokenId id, const Eigen::Ref<const Eigen::VectorXd>& key,
                          const Eigen::Ref<const Eigen::VectorXd>& value) {
  Impl& m = *impl_;
  if (contains(id)) throw AlreadyExists("add: token id " + std::to_string(id) + " already present");
  check_vec(key, m.key_dim, "key", id);
  check_vec(value, m.value_dim, "value", id);
  m.settings.problem.check_key(key.data(), m.key_dim, id);
  const auto t0 = m.begin_op();
  OpDiagnostics dg;
  const bool changed = m.add_one(id, key.data(), value.data(), dg);
  m.finalize(changed, dg);
  return m.close_op(dg, t0);
}

OpDiagnostics Memory::add_batch(const TokenSet& tokens) {
  Impl& m = *impl_;
  if (tokens.keys.cols() != m.key_dim && tokens.size() > 0)
    throw InvalidArgument("add_batch: keys have dimension " + std::to_string(tokens.keys.cols()) +
                          ", memory has " + std::to_string(m.key_dim));
  if (tokens.values.cols() != m.value_dim && tokens.size() > 0)
    throw InvalidArgument("add_batch: values have dimension " +
                          std::to_string(tokens.values.cols()) + ", memory has " +
                          std::to_string(m.value_dim));
  tokens.validate(m.settings.problem);
  for (TokenId id : tokens.ids)
    if (contains(id))
      throw AlreadyExists("add_batch: token id " + std::to_string(id) + " already present");
  const auto t0 = m.begin_op();
  OpDiagnostics dg;
  bool pending = false;
  for (int r = 0; r < tokens.size(); ++r) {
    const bool changed =
        m.add_one(tokens.ids[r], tokens.keys.row(r).data(), tokens.values.row(r).data(), dg);
    if (changed) {
      // The path needs an exact KKT point to continue; a warm-up boundary needs the canonical
      // warm-up point. Finish eagerly only where the next step depends on it.
      pending = true;
      if (m.needs_batch || detail::is_warmup(m.num_tokens, m.settings.problem.C) ||
          m.status == Status::kEmpty || m.warmup) {
        m.finalize(true, dg);
        pending = false;
      }
    }
  }
  if (pending) m.finalize(true, dg);
  m.invalidate_views();
  return m.close_op(dg, t0);
}

OpDiagnostics Memory::remove(TokenId id) { return remove_batch({id}); }

OpDiagnostics Memory::remove_batch(const std::vector<TokenId>& ids_in) {
  Impl& m = *impl_;
  std::vector<TokenId> ids = ids_in;
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!contains(ids[i]))
      throw NotFound("remove: token id " + std::to_string(ids[i]) + " not present");
    if (i > 0 && ids[i] == ids[i - 1])
      throw InvalidArgument("remove: token id " + std::to_string(ids[i]) + " listed twice");
  }
  const auto t0 = m.begin_op();
  OpDiagnostics dg;
  bool changed = false;
  for (TokenId id : ids) {
    const bool was_warm = m.warmup;
    changed = m.remove_one(m.slot_of.at(id), dg) || changed;
    if (changed && (was_warm || m.warmup)) {
      m.finalize(true, dg);
      changed = false;
    }
  }
  m.finalize(changed, dg);
  return m.close_op(dg, t0);
}

std::vector<TokenId> Memory::evict_reserve(OpDiagnostics* diag) {
  Impl& m = *impl_;
  std::vector<TokenId> out;
  OpDiagnostics dg;
  if (m.warmup) {  // in warm-up every token carries weight
    if (diag) *diag = dg;
    return out;
  }
  std::vector<int> r;
  for (int i = 0; i < m.slots_used; ++i)
    if (m.live[i] && m.set_of[i] == Set::kReserve) r.push_back(i);
  std::sort(r.begin(), r.end(), [&](int x, int y) { return m.ids[x] < m.ids[y]; });
  for (int s : r) {
    out.push_back(m.ids[s]);
    m.erase_token(s);
    ++m.evicted;
    ++dg.ops;
  }
  m.state_valid = false;  // support (and so readouts) unchanged
  if (diag) *diag = dg;
  m.totals += dg;
  return out;
}

Eigen::VectorXd Memory::readout(const Eigen::Ref<const Eigen::VectorXd>& q) const {
  return svattn::readout(impl_->settings.problem.kernel, impl_->support(), q);
}

double Memory::decision(const Eigen::Ref<const Eigen::VectorXd>& q) const {
  return decision_function(impl_->settings.problem.kernel, impl_->support(), impl_->b, q);
}

State Memory::state() const {
  Impl& m = *impl_;
  if (!m.state_valid) {
    // Slots in ascending id from the hash buckets; the hash rehashes only the buckets changed
    // since the last state (docs/math.md §6), no copy of the tokens.
    std::vector<TokenId> ids;
    std::vector<double> a;
    std::vector<Set> s;
    ids.reserve(static_cast<size_t>(m.num_tokens));
    a.reserve(static_cast<size_t>(m.num_tokens));
    s.reserve(static_cast<size_t>(m.num_tokens));
    StateHashParts parts;
    m.buckets.for_each_slot([&](int slot) {
      ids.push_back(m.ids[slot]);
      a.push_back(m.alpha[slot]);
      s.push_back(m.set_of[slot]);
      std::uint64_t bits;
      std::memcpy(&bits, &m.alpha[slot], sizeof bits);
      if (bits != 0) parts.nonzero_alpha.emplace_back(m.ids[slot], m.alpha[slot]);
    });
    // Residuals of the last canonical refinement; operations that leave (a, b) untouched (a new
    // reserve token with g >= 0, removing or evicting reserve tokens) leave them unchanged.
    const KktReport kkt = m.num_tokens > 0 ? m.kkt : KktReport{};
    parts.n = ids.size();
    m.state_cache = detail::build_state_unhashed(m.settings.problem, std::move(ids), m.key_dim,
                                                 m.value_dim, std::move(a), s, m.b, kkt, m.status,
                                                 m.warmup);
    parts.d = m.key_dim;
    parts.dv = m.value_dim;
    parts.b = m.b;
    const std::vector<BucketDigest>& digests =
        m.buckets.digests(m.key_dim, m.value_dim, [&](int slot) {
          return CanonicalRow{m.ids[slot], m.key(slot), m.value(slot)};
        });
    m.state_cache.state_sha256 = state_sha256_from_parts(m.settings.problem, parts, digests);
    m.state_valid = true;
  }
  return m.state_cache;
}

std::string Memory::state_sha256() const { return state().state_sha256; }
TokenSet Memory::tokens() const { return impl_->tokens_sorted(); }

TokenSet Memory::tokens(const std::vector<TokenId>& ids) const {
  const Impl& m = *impl_;
  TokenSet t;
  t.ids = ids;
  t.keys.resize(static_cast<Eigen::Index>(ids.size()), m.key_dim);
  t.values.resize(static_cast<Eigen::Index>(ids.size()), m.value_dim);
  for (std::size_t r = 0; r < ids.size(); ++r) {
    const auto it = m.slot_of.find(ids[r]);
    if (it == m.slot_of.end())
      throw NotFound("tokens: token id " + std::to_string(ids[r]) + " not present");
    const auto i = static_cast<Eigen::Index>(r);
    for (int k = 0; k < m.key_dim; ++k) t.keys(i, k) = m.key(it->second)[k];
    for (int k = 0; k < m.value_dim; ++k) t.values(i, k) = m.value(it->second)[k];
  }
  return t;
}

double Memory::alpha(TokenId id) const {
  auto it = impl_->slot_of.find(id);
  if (it == impl_->slot_of.end())
    throw NotFound("alpha: token id " + std::to_string(id) + " not present");
  return impl_->alpha[it->second];
}

const Eigen::MatrixXd& Memory::bordered_inverse() const { return impl_->bordered.view(); }

std::vector<TokenId> Memory::margin_order() const {
  std::vector<TokenId> out;
  for (int s : impl_->margin) out.push_back(impl_->ids[s]);
  return out;
}

Memory Memory::restore(const MemorySettings& settings, const TokenSet& tokens, const State& state,
                       OpDiagnostics* diag, const std::vector<double>* hints) {
  settings.validate();
  tokens.validate(settings.problem);
  if (tokens.size() > 0 &&
      (tokens.keys.cols() != state.dim || tokens.values.cols() != state.value_dim))
    throw InvalidArgument("restore: token dimensions do not match the state");
  {
    // The state must have been solved under these problem settings (they are part of its hash).
    const ProblemSettings& a = state.settings;
    const ProblemSettings& b = settings.problem;
    auto differ = [](const char* field, const std::string& x, const std::string& y) {
      throw InvalidArgument(std::string("restore: the state was solved with ") + field + " = " + x +
                            ", the settings have " + field + " = " + y);
    };
    auto num = [](double v) {  // shortest decimal that reads back as v
      for (int prec = 15;; ++prec) {
        std::ostringstream os;
        os.precision(prec);
        os << v;
        if (prec >= 17 || std::stod(os.str()) == v) return os.str();
      }
    };
    if (a.kernel.type != b.kernel.type)
      differ("kernel", to_string(a.kernel.type), to_string(b.kernel.type));
    if (a.kernel.bandwidth != b.kernel.bandwidth)
      differ("kernel.bandwidth", num(a.kernel.bandwidth), num(b.kernel.bandwidth));
    if (a.kernel.degree != b.kernel.degree)
      differ("kernel.degree", std::to_string(a.kernel.degree), std::to_string(b.kernel.degree));
    if (a.kernel.coef0 != b.kernel.coef0)
      differ("kernel.coef0", num(a.kernel.coef0), num(b.kernel.coef0));
    if (a.C != b.C) differ("C", num(a.C), num(b.C));
    if (a.ridge != b.ridge) differ("ridge", num(a.ridge), num(b.ridge));
  }
  Memory mem(settings, state.dim > 0 ? state.dim : static_cast<int>(tokens.keys.cols()),
             state.value_dim > 0 ? state.value_dim : static_cast<int>(tokens.values.cols()));
  Impl& m = *mem.impl_;
  OpDiagnostics dg;
  // The store hands the state's ids in the tokens' order: then alpha is read by row, else by id.
  const bool aligned = state.ids == tokens.ids && state.alpha.size() == state.ids.size();
  std::unordered_map<TokenId, double> a;
  if (!aligned)
    for (size_t t = 0; t < state.ids.size(); ++t) a[state.ids[t]] = state.alpha[t];
  // Room for the support's columns while there are no rows, then every slot at once: no
  // regrowth copies the column cache (support_columns.h), untouched rows stay unmapped.
  const size_t support = state.partition.margin.size() + state.partition.error.size();
  m.columns.reserve_columns(static_cast<int>(2 * support) + 16);
  m.grow(tokens.size(), true);  // n slots, not the next power of two (+31 % at 200k)
  m.slot_of.reserve(static_cast<size_t>(tokens.size()));
  const bool seeded = hints != nullptr && hints->size() == static_cast<size_t>(tokens.size());
  if (seeded) m.b = state.b;  // the offset the bounds refer to (memory_restore.cpp)
  for (int r = 0; r < tokens.size(); ++r) {
    const int s =
        m.insert_token(tokens.ids[r], tokens.keys.row(r).data(), tokens.values.row(r).data());
    if (aligned) {
      m.alpha[s] = state.alpha[static_cast<size_t>(r)];
    } else {
      auto it = a.find(tokens.ids[r]);
      m.alpha[s] = it == a.end() ? 0.0 : it->second;
    }
    if (seeded && m.alpha[s] == 0.0) m.seed_gradient_bound(s, (*hints)[static_cast<size_t>(r)]);
  }
  if (m.num_tokens > 0) {
    m.finish(dg);
    const bool ok = m.status == Status::kOptimal || m.status == Status::kWarmup;
    if (!ok || mem.state_sha256() != state.state_sha256) {
      // The stored state does not describe these tokens: re-solve from scratch.
      m.batch_rebuild(dg);
    }
  }
  dg.kernel_evaluations = m.kernel_evaluations;
  if (diag) *diag = dg;
  m.totals += dg;
  return mem;
}

void Memory::check_invariants() const {
  Impl& m = *impl_;
  int count = 0;
  for (int i = 0; i < m.slots_used; ++i) {
    if (!m.live[i]) continue;
    ++count;
    SVATTN_ASSERT(m.slot_of.at(m.ids[i]) == i, "slot map out of sync");
    const int p = m.columns.pos(i);
    if (p >= 0)
      for (int j = 0; j < m.slots_used; ++j)
        if (m.live[j] && m.columns.valid(j, p))
          SVATTN_ASSERT(m.columns.row(j)[p] == m.kernel_at(j, i),
                        "cached kernel column differs from a fresh value");
  }
  SVATTN_ASSERT(count == m.num_tokens, "token count out of sync");
  m.check_slack_index();
  // Screening (docs/math.md §4): the bound kept for every reserve token is a lower bound of its
  // exact gradient, and the exact gradient has the reserve sign, on every token (screened or not).
  if (m.status == Status::kOptimal && !m.warmup) {
    const double scale = std::max(1.0, m.kmax);
    for (int i = 0; i < m.slots_used; ++i) {
      if (!m.live[i] || m.set_of[i] != Set::kReserve) continue;
      double acc = 0.0;
      for (int j : m.support_by_id) acc += m.kernel_at(i, j) * m.alpha[j];
      const double g = acc - m.kdiag[i] / 2 + m.b;
      // The drift bound, exactly as gradient_lower_bound gives it (the bound a store persists).
      const double lower = m.gradient_lower_bound(i);
      SVATTN_ASSERT(g >= -1e-9 * scale, "reserve token " + std::to_string(m.ids[i]) +
                                            " violates KKT: g = " + std::to_string(g));
      SVATTN_ASSERT(lower <= g + 1e-9 * scale,
                    "screening bound of token " + std::to_string(m.ids[i]) +
                        " exceeds its gradient: " + std::to_string(lower) + " > " +
                        std::to_string(g));
      if (m.exact_offset && std::isfinite(m.spread_s[i])) {
        const double spread_lower = m.grad[i] + (m.b - m.spread_b[i]) - m.spread_loss(i, 0, 0);
        SVATTN_ASSERT(spread_lower <= g + 1e-9 * scale,
                      "spread bound of token " + std::to_string(m.ids[i]) +
                          " exceeds its gradient: " + std::to_string(spread_lower) + " > " +
                          std::to_string(g));
      }
    }
  }
  const int ms = static_cast<int>(m.margin.size());
  for (int s : m.margin)
    SVATTN_ASSERT(m.set_of[s] == Set::kMargin, "path margin list holds a non-margin token");
  if (ms > 0 && !m.warmup) {
    SVATTN_ASSERT(m.bordered.dim() == ms + 1, "bordered inverse has the wrong size");
    Eigen::MatrixXd B(ms + 1, ms + 1);
    B(0, 0) = 0;
    for (int k = 0; k < ms; ++k) {
      B(0, k + 1) = B(k + 1, 0) = 1;
      for (int l = 0; l < ms; ++l) B(l + 1, k + 1) = m.q_at(m.margin[l], m.margin[k]);
    }
    for (int k = 0; k < ms; ++k)
      SVATTN_ASSERT(m.columns.pos(m.margin[k]) >= 0, "margin token without a kernel column");
    // Relative residual: |R B - I| / (|R| |B|) in the max norm, which rank-one updates keep near
    // machine precision times the growth since the last refactorisation.
    const double err =
        (m.bordered.m() * B - Eigen::MatrixXd::Identity(ms + 1, ms + 1)).cwiseAbs().maxCoeff();
    const double rel =
        err / (m.bordered.m().cwiseAbs().maxCoeff() * B.cwiseAbs().maxCoeff() * (ms + 1));
    SVATTN_ASSERT(rel < 1e-8, "bordered inverse drifted: |R B - I| = " + std::to_string(err) +
                                  " (relative " + std::to_string(rel) + ")");
  }
}

}  // namespace svattn
