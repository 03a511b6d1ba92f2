// Independent verifier and removal certificates (docs/math.md §7, docs/api.md "Certificates"). The
// JSON
// form of a certificate lives in certificate_json.cpp.
#include "svattn/certificate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "check_kernel.h"
#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/io.h"
#include "svattn/readout.h"

namespace svattn {
namespace {

// The verifier recomputes everything from the tokens with its own loops; it shares only the kernel
// function and the documented byte layout with the solver.

bool is_warm(int n, double C) { return n > 0 && static_cast<double>(n) * C <= 1.0 + 1e-9; }

// Sum, box and set membership of the stated coefficients. n = 0: the empty state (b = 0, no
// support) is the only feasible one.
void check_feasibility(const State& state, VerifyReport& rep) {
  const int n = static_cast<int>(state.ids.size());
  if (n == 0) {
    rep.kkt.sum_error = 0;
    rep.kkt.box_violation = 0;
    rep.feasible = state.b == 0.0 && state.partition.margin.empty() &&
                   state.partition.error.empty() && state.partition.reserve.empty();
    return;
  }
  const double C = state.settings.C;
  const bool warm = is_warm(n, C);
  // Membership by a merge walk when ids and sets are ascending (a canonical state's are), else by
  // hash sets; the sum runs over the tokens in order either way.
  const auto ascending = [](const std::vector<TokenId>& v) {
    return std::adjacent_find(v.begin(), v.end(), std::greater_equal<TokenId>()) == v.end();
  };
  const bool merge =
      ascending(state.ids) && ascending(state.partition.margin) && ascending(state.partition.error);
  std::unordered_set<TokenId> margin, error;
  if (!merge) {
    margin.insert(state.partition.margin.begin(), state.partition.margin.end());
    error.insert(state.partition.error.begin(), state.partition.error.end());
  }
  std::size_t im = 0, ie = 0;  // merge cursors into margin and error
  double sum = 0.0, box = 0.0;
  bool sets_ok = true;
  for (int t = 0; t < n; ++t) {
    const double a = state.alpha[t];
    sum += a;
    const double cap = warm ? 1.0 / n : C;
    box = std::max({box, -a, a - cap});
    const TokenId id = state.ids[t];
    bool in_margin, in_error;
    if (merge) {
      while (im < state.partition.margin.size() && state.partition.margin[im] < id) ++im;
      while (ie < state.partition.error.size() && state.partition.error[ie] < id) ++ie;
      in_margin = im < state.partition.margin.size() && state.partition.margin[im] == id;
      in_error = ie < state.partition.error.size() && state.partition.error[ie] == id;
    } else {
      in_margin = margin.count(id) != 0;
      in_error = error.count(id) != 0;
    }
    if (warm)
      sets_ok = sets_ok && a == 1.0 / n;
    else if (a == 0)
      sets_ok = sets_ok && !in_margin && !in_error;
    else if (a == C)
      sets_ok = sets_ok && in_error;
    else
      sets_ok = sets_ok && in_margin && a > 0 && a < C;
  }
  rep.kkt.sum_error = std::abs(sum - 1.0);
  rep.kkt.box_violation = std::max(0.0, box);
  rep.feasible = sets_ok && rep.kkt.sum_error <= 1e-10 && rep.kkt.box_violation == 0.0;
}

// KKT signs: g_i = sum_j K_ij a_j + mu a_i - K_ii/2 + b on every token (vacuous for n = 0), in
// blocks of kCheckBlock rows (O(block * |S u E|) numbers, not O(n * |S u E|)). The kernel block is
// dense algebra (check_kernel.h: GEMM inner products, vectorised exp), not the solver's scalar
// loops: the check has a tolerance, so it needs no bit-for-bit agreement with the solver. Blocks
// are shared out to up to kCheckThreads threads; the maximum over them does not depend on the
// split.
constexpr int kCheckBlock = 4096;
constexpr int kCheckThreads = 4;

struct BlockWorst {
  double worst = 0.0;
  double scale = 1.0;
};

// Where the check reads keys: rows [t0, t0 + m) of the state's order (block), or the rows `rows`
// (the support), as m x d row-major doubles; `buf` may hold them.
struct KeySource {
  std::function<const double*(int t0, int m, RowMatrix& buf)> block;
  std::function<void(const std::vector<int>& rows, RowMatrix& out)> gather;
};

void check_block(const KeySource& src, const State& state, detail::CheckKernelArgs args, int t0,
                 RowMatrix& X, std::vector<double>& ka, std::vector<double>& kdiag,
                 BlockWorst& out) {
  const ProblemSettings& p = state.settings;
  const int m = args.m;
  args.x = src.block(t0, m, X);
  ka.resize(static_cast<size_t>(m));
  kdiag.resize(static_cast<size_t>(m));
  detail::check_kernel_block(args, ka.data(), kdiag.data());
  const bool warm = is_warm(static_cast<int>(state.ids.size()), p.C);
  for (int r = 0; r < m; ++r) {
    const double a = state.alpha[t0 + r];
    const double g = ka[r] + p.ridge * a - kdiag[r] / 2 + state.b;
    double v;
    if (warm)
      v = std::max(0.0, g);
    else if (a == 0)
      v = std::max(0.0, -g);
    else if (a == p.C)
      v = std::max(0.0, g);
    else
      v = std::abs(g);
    // A non-finite key or kernel value fails the check (std::max would drop a NaN).
    if (!std::isfinite(g)) v = std::numeric_limits<double>::infinity();
    out.worst = std::max(out.worst, v);
    out.scale = std::max(out.scale, kdiag[r]);
  }
}

void check_kkt(const KeySource& src, int d, const State& state, VerifyReport& rep) {
  const int n = static_cast<int>(state.ids.size());
  if (n == 0) {
    rep.kkt.max_violation = 0;
    rep.kkt_ok = true;
    return;
  }
  const ProblemSettings& p = state.settings;
  std::vector<int> sup;
  for (int t = 0; t < n; ++t)
    if (state.alpha[t] != 0) sup.push_back(t);
  Eigen::VectorXd aS(static_cast<Eigen::Index>(sup.size()));
  for (size_t c = 0; c < sup.size(); ++c) aS[c] = state.alpha[sup[c]];
  RowMatrix XS;
  src.gather(sup, XS);
  const Eigen::VectorXd sq_s = XS.rowwise().squaredNorm();
  detail::CheckKernelArgs args;
  args.type = static_cast<int>(p.kernel.type);
  args.bandwidth = p.kernel.bandwidth;
  args.degree = p.kernel.degree;
  args.coef0 = p.kernel.coef0;
  args.d = d;
  args.xs = XS.data();
  args.sq_s = sq_s.data();
  args.a_s = aS.data();
  args.s = static_cast<int>(sup.size());
  const int blocks = (n + kCheckBlock - 1) / kCheckBlock;
  const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1,
                                 std::min(blocks, kCheckThreads));
  std::vector<BlockWorst> part(static_cast<size_t>(threads));
  std::vector<std::exception_ptr> failed(static_cast<size_t>(threads));
  auto work = [&](int w) {
    try {
      RowMatrix X;
      std::vector<double> ka, kdiag;
      for (int b = w; b < blocks; b += threads) {
        detail::CheckKernelArgs a = args;
        a.m = std::min(kCheckBlock, n - b * kCheckBlock);
        check_block(src, state, a, b * kCheckBlock, X, ka, kdiag, part[w]);
      }
    } catch (...) {
      failed[w] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < threads; ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
  double worst = 0.0, scale = 1.0;
  for (const BlockWorst& b : part) {
    worst = std::max(worst, b.worst);
    scale = std::max(scale, b.scale);
  }
  rep.kkt.max_violation = worst;
  // Accept violations up to 1e-8 * scale: the canonical refinement's own acceptance is tighter
  // (docs/math.md); this bound proves the state is an eps-KKT point of the stated problem.
  rep.kkt_ok = worst <= 1e-8 * scale;
}

// Keys of a token set in the state's order (`order[t]`: the row of state token t), read in place
// where a block is consecutive rows.
KeySource token_set_source(const TokenSet& tokens, const std::vector<int>& order) {
  KeySource s;
  s.block = [&tokens, &order](int t0, int m, RowMatrix& X) -> const double* {
    bool contiguous = true;
    for (int r = 1; r < m && contiguous; ++r) contiguous = order[t0 + r] == order[t0] + r;
    if (contiguous) return tokens.keys.row(order[t0]).data();
    X.resize(m, tokens.keys.cols());
    for (int r = 0; r < m; ++r) X.row(r) = tokens.keys.row(order[t0 + r]);
    return X.data();
  };
  s.gather = [&tokens, &order](const std::vector<int>& rows, RowMatrix& out) {
    out.resize(static_cast<Eigen::Index>(rows.size()), tokens.keys.cols());
    for (size_t c = 0; c < rows.size(); ++c) out.row(c) = tokens.keys.row(order[rows[c]]);
  };
  return s;
}

// Keys read from a memory block by block (Memory::tokens(ids) is const and thread-safe): the
// check never holds a copy of all n keys.
KeySource memory_source(const Memory& mem, const State& state) {
  KeySource s;
  s.block = [&mem, &state](int t0, int m, RowMatrix& X) -> const double* {
    const std::vector<TokenId> ids(state.ids.begin() + t0, state.ids.begin() + t0 + m);
    X = mem.tokens(ids).keys;
    return X.data();
  };
  s.gather = [&mem, &state](const std::vector<int>& rows, RowMatrix& out) {
    std::vector<TokenId> ids;
    for (int t : rows) ids.push_back(state.ids[static_cast<size_t>(t)]);
    out = mem.tokens(ids).keys;
  };
  return s;
}

bool keys_distinct(const RowMatrix& keys) {
  const Eigen::Index n = keys.rows();
  const Eigen::Index d = keys.cols();
  std::vector<Eigen::Index> idx(static_cast<size_t>(n));
  for (Eigen::Index r = 0; r < n; ++r) idx[r] = r;
  std::sort(idx.begin(), idx.end(), [&](Eigen::Index a, Eigen::Index b) {
    return std::lexicographical_compare(keys.row(a).data(), keys.row(a).data() + d,
                                        keys.row(b).data(), keys.row(b).data() + d);
  });
  for (size_t r = 1; r < idx.size(); ++r)
    if (std::equal(keys.row(idx[r]).data(), keys.row(idx[r]).data() + d,
                   keys.row(idx[r - 1]).data()))
      return false;
  return true;
}

void uniqueness(const TokenSet& tokens, const ProblemSettings& p, VerifyReport& rep) {
  const int n = tokens.size();
  rep.unique = true;
  if (n == 0) {
    rep.uniqueness_reason = "empty memory: the empty state is the only state";
  } else if (is_warm(n, p.C)) {
    rep.uniqueness_reason = "warm-up: n*C <= 1 leaves a single feasible point";
  } else if (p.ridge > 0) {
    rep.uniqueness_reason = "ridge > 0: the objective is strictly convex";
  } else if (p.kernel.type == KernelType::kRbf) {
    rep.unique = keys_distinct(tokens.keys);
    rep.uniqueness_reason = rep.unique ? "RBF Gram matrix of distinct keys is positive definite"
                                       : "duplicate keys with ridge = 0: optimum may not be unique";
  } else {
    rep.unique = false;
    rep.uniqueness_reason = "ridge = 0 with a linear/poly kernel: uniqueness not established";
  }
}

double max_abs_dalpha(const State& a, const State& b) {
  if (a.ids != b.ids) return std::numeric_limits<double>::infinity();
  double da = 0.0;
  for (size_t t = 0; t < a.alpha.size(); ++t) da = std::max(da, std::abs(a.alpha[t] - b.alpha[t]));
  return da;
}

}  // namespace

namespace {

// verify_state's body. recompute_hash = false: the caller vouches that state.state_sha256 was just
// streamed from these tokens' bytes (removal_certificate: Memory::state() after the removal), so a
// second O(n d) pass is skipped and hash_ok only checks the hash is present.
VerifyReport verify_impl(const TokenSet& tokens, const State& state, const Tolerances& tol,
                         bool resolve, bool recompute_hash) {
  tol.validate();
  VerifyReport rep;
  const int n = tokens.size();
  if (static_cast<int>(state.ids.size()) != n || state.alpha.size() != state.ids.size()) {
    rep.error = "state and token set have different sizes";
    return rep;
  }
  try {  // the same settings and finite-kernel checks as every solving path
    state.settings.validate();
    tokens.validate(state.settings);
  } catch (const Error& e) {
    rep.error = std::string("state cannot be checked: ") + e.what();
    return rep;
  }
  bool finite = std::isfinite(state.b);
  for (double a : state.alpha) finite = finite && std::isfinite(a);
  if (!finite) {
    rep.error = "state has a non-finite coefficient (alpha or b)";
    return rep;
  }
  std::vector<int> order(n);
  if (tokens.ids == state.ids) {  // the token set is in the state's order: no id lookup
    for (int t = 0; t < n; ++t) order[t] = t;
  } else {
    std::unordered_map<TokenId, int> row;
    for (int r = 0; r < n; ++r) row[tokens.ids[r]] = r;
    for (int t = 0; t < n; ++t) {
      auto it = row.find(state.ids[t]);
      if (it == row.end()) {
        rep.error = "state ids are not the token ids in ascending order";
        return rep;
      }
      order[t] = it->second;
    }
  }
  for (int t = 1; t < n; ++t) {
    if (state.ids[t] <= state.ids[t - 1]) {
      rep.error = "state ids are not the token ids in ascending order";
      return rep;
    }
  }
  const ProblemSettings& p = state.settings;
  rep.hash_ok = recompute_hash
                    ? canonical_sha256(p, tokens, order, state.alpha, state.b) == state.state_sha256
                    : state.state_sha256.size() == 64;
  check_feasibility(state, rep);
  check_kkt(token_set_source(tokens, order), static_cast<int>(tokens.keys.cols()), state, rep);
  uniqueness(tokens, p, rep);
  if (resolve) {
    BatchSettings bs;
    bs.problem = p;
    bs.tolerances = tol;
    const BatchResult br = solve_batch(tokens, bs);
    rep.resolved = true;
    rep.resolve_sha256 = br.state.state_sha256;
    rep.resolve_hash_equal = br.state.state_sha256 == state.state_sha256;
    rep.resolve_partition_equal = br.state.partition == state.partition;
    rep.resolve_max_abs_dalpha = max_abs_dalpha(br.state, state);
  }
  return rep;
}

}  // namespace

VerifyReport verify_state(const TokenSet& tokens, const State& state, const Tolerances& tol,
                          bool resolve) {
  return verify_impl(tokens, state, tol, resolve, true);
}

StateSummary summarize(const State& s) {
  StateSummary m;
  m.n = s.ids.size();
  m.margin = s.partition.margin.size();
  m.error = s.partition.error.size();
  m.reserve = s.partition.reserve.size();
  m.state_sha256 = s.state_sha256;
  m.status = s.status;
  m.kkt = s.kkt;
  return m;
}

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The reference argument: every removed token had a = 0 in `before`, and `after` holds exactly the
// remaining tokens with bit-identical coefficients, b and partition. Then every remaining g_i is
// unchanged (it depends only on the unchanged support), so the remaining KKT conditions are those
// of `before`. O(n) comparisons; no kernel value.
bool unmoved(const State& before, const State& after, const std::vector<TokenId>& removed) {
  if (!same_bits(before.b, after.b) || before.status != after.status) return false;
  if (after.ids.size() + removed.size() != before.ids.size()) return false;
  size_t r = 0, a = 0;
  for (size_t t = 0; t < before.ids.size(); ++t) {
    const TokenId id = before.ids[t];
    if (r < removed.size() && removed[r] == id) {
      if (before.alpha[t] != 0.0) return false;
      ++r;
      continue;
    }
    if (a >= after.ids.size() || after.ids[a] != id || !same_bits(after.alpha[a], before.alpha[t]))
      return false;
    ++a;
  }
  return r == removed.size() && a == after.ids.size() &&
         after.partition.margin == before.partition.margin &&
         after.partition.error == before.partition.error;
}

OptimalityCheck full_from(const VerifyReport& vr) {
  OptimalityCheck v;
  v.performed = true;
  v.argument = CertificateArgument::kFull;
  v.checks = {"feasibility", "kkt_signs_all_tokens", "uniqueness", "hash"};
  v.feasible = vr.feasible;
  v.kkt_ok = vr.kkt_ok;
  v.max_kkt_violation = vr.kkt.max_violation;
  v.unique = vr.unique;
  v.uniqueness_reason = vr.uniqueness_reason.empty() ? vr.error : vr.uniqueness_reason;
  v.hash_ok = vr.hash_ok;
  return v;
}

OptimalityCheck full_check(const TokenSet& remaining, const State& after, const Tolerances& tol) {
  return full_from(verify_impl(remaining, after, tol, false, false));
}

// Whether the full argument can read the memory block by block instead of a copy of every token:
// only uniqueness for RBF with ridge 0 needs all keys at once (keys_distinct).
bool streamable(const State& after) {
  const ProblemSettings& p = after.settings;
  const int n = static_cast<int>(after.ids.size());
  return !(n > 0 && !is_warm(n, p.C) && p.ridge == 0 && p.kernel.type == KernelType::kRbf);
}

// The full argument on the memory's own tokens, read in blocks (the check never holds a copy of
// all n keys): the state's settings valid, coefficients finite, ids ascending (so distinct),
// feasibility, the KKT sign of every token (a non-finite key or kernel value fails it), uniqueness
// from the settings, and the hash Memory::state() streamed from the tokens (as full_check).
OptimalityCheck full_check_memory(const Memory& mem, const State& after, const Tolerances& tol) {
  tol.validate();
  VerifyReport vr;
  try {
    after.settings.validate();
  } catch (const Error& e) {
    vr.error = std::string("state cannot be checked: ") + e.what();
  }
  bool finite = std::isfinite(after.b);
  for (double a : after.alpha) finite = finite && std::isfinite(a);
  if (vr.error.empty() && !finite) vr.error = "state has a non-finite coefficient (alpha or b)";
  if (vr.error.empty() && after.alpha.size() != after.ids.size())
    vr.error = "state ids and coefficients have different sizes";
  if (vr.error.empty() && std::adjacent_find(after.ids.begin(), after.ids.end(),
                                             std::greater_equal<TokenId>()) != after.ids.end())
    vr.error = "state ids are not ascending";
  if (!vr.error.empty()) return full_from(vr);
  vr.hash_ok = after.state_sha256.size() == 64;
  check_feasibility(after, vr);
  check_kkt(memory_source(mem, after), after.dim, after, vr);
  TokenSet sized;  // uniqueness() reads only the size here (streamable)
  sized.ids.resize(after.ids.size());
  uniqueness(sized, after.settings, vr);
  return full_from(vr);
}

// The reference argument reads no token bytes and hashes nothing: `after` comes from
// after_memory.state(), whose hash Memory::state() streamed from the remaining tokens' bytes after
// the removal (every mutation drops the cached state), and hashing them a second time would add
// O(n d) and prove nothing new (docs/api.md "Certificates"). Only the uniqueness argument for RBF
// with ridge = 0 needs the keys, so only then are they copied out of the memory.
OptimalityCheck reference_check(const Memory& after_memory, const State& before,
                                const State& after) {
  VerifyReport vr;
  vr.hash_ok = after.state_sha256.size() == 64;
  check_feasibility(after, vr);
  const ProblemSettings& p = after.settings;
  const int n = static_cast<int>(after.ids.size());
  if (n > 0 && !is_warm(n, p.C) && p.ridge == 0 && p.kernel.type == KernelType::kRbf) {
    uniqueness(after_memory.tokens(), p, vr);
  } else {
    TokenSet sized;  // uniqueness() reads only the size in the other cases
    sized.ids.resize(after.ids.size());
    uniqueness(sized, p, vr);
  }
  OptimalityCheck v;
  v.performed = true;
  v.argument = CertificateArgument::kReference;
  v.checks = {"removed_alpha_zero", "coefficients_unchanged", "feasibility", "uniqueness", "hash"};
  v.feasible = vr.feasible;
  v.kkt_ok = true;  // by reference: the remaining g_i are those of `before` (see unmoved())
  v.max_kkt_violation = before.kkt.max_violation;
  v.unique = vr.unique;
  v.uniqueness_reason = vr.uniqueness_reason;
  v.hash_ok = vr.hash_ok;
  v.reference_sha256 = before.state_sha256;
  return v;
}

ResolveCheck resolve_check(const Memory& after_memory, const TokenSet& remaining,
                           const State& after, const RowMatrix& probes) {
  const MemorySettings& ms = after_memory.settings();
  BatchSettings bs;
  bs.problem = ms.problem;
  bs.tolerances = ms.tolerances;
  const BatchResult br = solve_batch(remaining, bs);
  ResolveCheck c;
  c.performed = true;
  c.retrained_sha256 = br.state.state_sha256;
  c.hash_equal = br.state.state_sha256 == after.state_sha256;
  c.partition_equal = br.state.partition == after.partition;
  c.max_abs_dalpha = max_abs_dalpha(br.state, after);
  if (remaining.size() > 0 && probes.rows() > 0) {
    const Support sup = support_of(br.state, remaining);
    for (Eigen::Index q = 0; q < probes.rows(); ++q) {
      const Eigen::VectorXd qv = probes.row(q).transpose();
      c.max_abs_ddecision = std::max(
          c.max_abs_ddecision, std::abs(after_memory.decision(qv) -
                                        decision_function(ms.problem.kernel, sup, br.state.b, qv)));
      const Eigen::VectorXd o1 = after_memory.readout(qv);
      const Eigen::VectorXd o2 = readout(ms.problem.kernel, sup, qv);
      c.max_abs_dreadout = std::max(c.max_abs_dreadout, (o1 - o2).cwiseAbs().maxCoeff());
    }
  }
  c.probes = probes.rows();
  c.retrain_seconds = br.diagnostics.smo_seconds + br.diagnostics.refine_seconds;
  return c;
}

std::string scope_text(MemoryMode mode, std::uint64_t evictions) {
  if (mode == MemoryMode::kAudit && evictions > 0) {
    return "audit mode, but " + std::to_string(evictions) +
           " reserve token(s) were evicted from this memory earlier (evict_reserve): the state "
           "equals the optimum on the retained tokens minus the removed ones. An evicted token "
           "might have re-entered the support after this removal, so exactness is relative to the "
           "retained tokens only.";
  }
  if (mode == MemoryMode::kAudit) {
    return "audit mode: the state after removal equals the optimum on every token ever ingested "
           "minus the removed ones (exact forgetting under the same fixed C, ridge and kernel).";
  }
  return "bounded mode: reserve tokens were evicted earlier; the state equals the optimum on the "
         "retained tokens minus the removed ones. An evicted token might have re-entered the "
         "support after this removal, so exactness is relative to the retained tokens only.";
}

std::string limits_text() {
  return "The certificate covers this memory's state and outputs. It covers a model's outputs only "
         "where keys and values are computed per record; if a deep model mixed the record into "
         "other tokens before the memory, those activations still depend on it.";
}

[[noreturn]] void bad_removal(const std::string& what) {
  throw InvalidArgument("removal_certificate: " + what);
}

bool same_problem(const ProblemSettings& a, const ProblemSettings& b) {
  return a.kernel.type == b.kernel.type && same_bits(a.kernel.bandwidth, b.kernel.bandwidth) &&
         a.kernel.degree == b.kernel.degree && same_bits(a.kernel.coef0, b.kernel.coef0) &&
         same_bits(a.C, b.C) && same_bits(a.ridge, b.ridge);
}

// What a certificate asserts about the removal itself, before any optimality argument: `before`
// is a state of this memory (same settings and dimensions), every removed id (sorted, distinct)
// was in `before` and is absent from the memory, and the memory holds exactly the ids of `before`
// minus the removed ones, and, when `evicting` (a bounded-mode memory, which evicts the tokens
// the removal leaves in reserve), minus evicted ones (docs/api.md "Certificates"). One merge walk,
// O(n); throws InvalidArgument naming the first id that breaks it.
void check_removal(const State& before, const State& after, const std::vector<TokenId>& removed,
                   bool evicting) {
  const auto dup = std::adjacent_find(removed.begin(), removed.end());
  if (dup != removed.end()) bad_removal("removed id " + std::to_string(*dup) + " is given twice");
  if (!same_problem(before.settings, after.settings) || before.dim != after.dim ||
      before.value_dim != after.value_dim)
    bad_removal("`before` is a state of another memory (settings or dimensions differ)");
  if (std::adjacent_find(before.ids.begin(), before.ids.end(), std::greater_equal<TokenId>()) !=
      before.ids.end())
    bad_removal("`before` is not a canonical state (its ids are not ascending)");
  if (before.alpha.size() != before.ids.size())
    bad_removal("`before` is not a canonical state (ids and coefficients differ in number)");
  for (const TokenId id : removed) {
    if (!std::binary_search(before.ids.begin(), before.ids.end(), id))
      bad_removal("removed id " + std::to_string(id) + " was not in `before`");
    if (std::binary_search(after.ids.begin(), after.ids.end(), id))
      bad_removal("removed id " + std::to_string(id) + " is still in the memory");
  }
  // Now `after` must be `before` without `removed`, in order.
  std::size_t r = 0, a = 0;
  for (const TokenId id : before.ids) {
    if (r < removed.size() && removed[r] == id) {
      ++r;
      continue;
    }
    if (a < after.ids.size() && after.ids[a] < id) break;  // an id `before` did not hold
    if (a >= after.ids.size() || after.ids[a] != id) {
      if (evicting) continue;  // evicted by the bounded memory during the removal
      bad_removal("id " + std::to_string(id) +
                  " of `before` is gone from the memory but is not among the removed ids");
    }
    ++a;
  }
  if (a < after.ids.size())
    bad_removal("the memory holds id " + std::to_string(after.ids[a]) +
                ", which `before` did not hold");
}

}  // namespace

RemovalCertificate removal_certificate(const State& before, const Memory& after_memory,
                                       const std::vector<TokenId>& removed,
                                       const std::string& record_id, const OpDiagnostics& diag,
                                       const CertificateOptions& options, const RowMatrix& probes) {
  const State& after = after_memory.state();  // after_memory is const: the reference stays valid
  const MemorySettings& ms = after_memory.settings();
  RemovalCertificate c;
  c.mode = ms.mode;
  c.settings = ms.problem;
  c.record_id = record_id;
  c.removed_ids = removed;
  std::sort(c.removed_ids.begin(), c.removed_ids.end());
  check_removal(before, after, c.removed_ids, ms.mode == MemoryMode::kBounded);
  c.before = summarize(before);
  c.after = summarize(after);
  c.solver = diag;
  c.evictions = after_memory.evictions();
  // The remaining tokens are copied out of the memory only for the checks that read them all.
  const bool by_reference =
      options.optimality_check && options.allow_reference && unmoved(before, after, c.removed_ids);
  const bool stream =
      options.optimality_check && !by_reference && !options.resolve && streamable(after);
  TokenSet remaining;
  if ((options.optimality_check && !by_reference && !stream) || options.resolve)
    remaining = after_memory.tokens();
  if (!options.optimality_check) {
    c.verify.note =
        "run `svattn memory verify` or verify_state() to check this state independently";
  } else if (by_reference) {
    c.verify = reference_check(after_memory, before, after);
  } else if (stream) {
    c.verify = full_check_memory(after_memory, after, ms.tolerances);
  } else {
    c.verify = full_check(remaining, after, ms.tolerances);
  }
  if (options.resolve) c.check = resolve_check(after_memory, remaining, after, probes);
  c.scope = scope_text(ms.mode, after_memory.evictions());
  c.limits = limits_text();
  return c;
}

RemovalCertificate removal_certificate(const StoredReserveRemoval& r) {
  const std::size_t m = r.support_ids.size();
  SVATTN_ASSERT(r.support_alpha.size() == m && r.support_is_error.size() == m,
                "support ids, coefficients and error flags must align");
  RemovalCertificate c;
  c.mode = r.settings.mode;
  c.settings = r.settings.problem;
  c.record_id = r.record_id;
  c.removed_ids = r.removed_ids;
  std::sort(c.removed_ids.begin(), c.removed_ids.end());
  c.before = r.before;
  c.after = r.after;
  OptimalityCheck& v = c.verify;
  v.performed = true;
  v.argument = CertificateArgument::kReference;
  v.checks = {"removed_alpha_zero", "coefficients_unchanged", "feasibility", "uniqueness", "hash"};
  // Feasibility over the support; every other coefficient is 0 by construction (the store holds
  // no coefficient for it), so the sum and the box are those of the support.
  const double C = r.settings.problem.C;
  double sum = 0.0, box = 0.0;
  bool sets_ok = !is_warm(static_cast<int>(r.after.n), C);
  for (std::size_t k = 0; k < m; ++k) {
    const double a = r.support_alpha[k];
    sum += a;
    box = std::max({box, -a, a - C});
    sets_ok = sets_ok && (r.support_is_error[k] ? a == C : (a > 0 && a < C));
  }
  v.feasible = sets_ok && std::abs(sum - 1.0) <= 1e-10 && box <= 0.0;
  v.kkt_ok = true;  // by reference: the remaining g_i are those of `before`
  v.max_kkt_violation = r.before.kkt.max_violation;
  VerifyReport vr;
  TokenSet sized;  // uniqueness() reads only the size unless RBF with ridge 0
  sized.ids.resize(r.after.n);
  if (r.settings.problem.ridge > 0 || r.after.n == 0) {
    uniqueness(sized, r.settings.problem, vr);
    v.unique = vr.unique;
    v.uniqueness_reason = vr.uniqueness_reason;
  } else {
    v.unique = false;
    v.uniqueness_reason =
        "not established: ridge = 0 and the keys were not read (run `svattn "
        "memory verify`)";
  }
  v.hash_ok = r.after.state_sha256.size() == 64;
  v.reference_sha256 = r.before.state_sha256;
  c.scope = scope_text(r.settings.mode, 0);
  c.limits = limits_text();
  return c;
}

RemovalCertificate removal_certificate(const State& before, const Memory& after_memory,
                                       const std::vector<TokenId>& removed,
                                       const std::string& record_id, const OpDiagnostics& diag,
                                       bool check, const RowMatrix& probes) {
  CertificateOptions o;
  o.optimality_check = check;
  o.allow_reference = false;
  o.resolve = check;
  return removal_certificate(before, after_memory, removed, record_id, diag, o, probes);
}

}  // namespace svattn
