// Independent verifier and deletion certificates (SPEC §5).
#include "svattn/certificate.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/io.h"
#include "svattn/readout.h"

namespace svattn {

// The verifier recomputes everything from the tokens with its own loops; it shares only the kernel
// function and the documented byte layout with the solver.
VerifyReport verify_state(const TokenSet& tokens, const State& state, const Tolerances& tol,
                          bool resolve) {
  tol.validate();
  VerifyReport rep;
  const int n = tokens.size();
  const int d = static_cast<int>(tokens.keys.cols());
  const ProblemSettings& p = state.settings;
  std::unordered_map<TokenId, int> row;
  for (int r = 0; r < n; ++r) row[tokens.ids[r]] = r;
  if (static_cast<int>(state.ids.size()) != n || state.alpha.size() != state.ids.size()) {
    rep.error = "state and token set have different sizes";
    return rep;
  }
  try {  // the same settings and finite-kernel checks as every solving path
    p.validate();
    tokens.validate(p);
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
  for (int t = 0; t < n; ++t) {
    auto it = row.find(state.ids[t]);
    if (it == row.end() || (t > 0 && state.ids[t] <= state.ids[t - 1])) {
      rep.error = "state ids are not the token ids in ascending order";
      return rep;
    }
    order[t] = it->second;
  }
  rep.hash_ok =
      sha256_hex(canonical_bytes(p, tokens, order, state.alpha, state.b)) == state.state_sha256;

  // Feasibility.
  const double C = p.C;
  const bool warm = static_cast<double>(n) * C <= 1.0 + 1e-9;
  double sum = 0.0, box = 0.0;
  bool sets_ok = true;
  std::unordered_set<TokenId> margin(state.partition.margin.begin(), state.partition.margin.end());
  std::unordered_set<TokenId> error(state.partition.error.begin(), state.partition.error.end());
  for (int t = 0; t < n; ++t) {
    const double a = state.alpha[t];
    sum += a;
    const double cap = warm ? 1.0 / n : C;
    box = std::max({box, -a, a - cap});
    const TokenId id = state.ids[t];
    if (warm)
      sets_ok = sets_ok && a == 1.0 / n;
    else if (a == 0)
      sets_ok = sets_ok && !margin.count(id) && !error.count(id);
    else if (a == C)
      sets_ok = sets_ok && error.count(id);
    else
      sets_ok = sets_ok && margin.count(id) && a > 0 && a < C;
  }
  rep.kkt.sum_error = std::abs(sum - 1.0);
  rep.kkt.box_violation = std::max(0.0, box);
  rep.feasible = sets_ok && rep.kkt.sum_error <= 1e-10 && rep.kkt.box_violation == 0.0 && n > 0;

  // KKT signs: g_i = sum_j K_ij a_j + mu a_i - K_ii/2 + b. The verifier evaluates the kernel block
  // K(all, support) with its own dense algebra (Eigen products, not the solver's scalar loops):
  // it checks within a tolerance, so it needs no bit-for-bit agreement with the solver.
  std::vector<int> sup;
  for (int t = 0; t < n; ++t)
    if (state.alpha[t] != 0) sup.push_back(t);
  RowMatrix X(n, d), XS(static_cast<Eigen::Index>(sup.size()), d);
  Eigen::VectorXd aS(static_cast<Eigen::Index>(sup.size()));
  for (int t = 0; t < n; ++t) X.row(t) = tokens.keys.row(order[t]);
  for (size_t k = 0; k < sup.size(); ++k) {
    XS.row(k) = X.row(sup[k]);
    aS[k] = state.alpha[sup[k]];
  }
  const Eigen::MatrixXd G = X * XS.transpose();  // inner products
  Eigen::MatrixXd KS(n, static_cast<Eigen::Index>(sup.size()));
  Eigen::VectorXd kdiag(n);
  const Eigen::VectorXd sq = X.rowwise().squaredNorm();
  switch (p.kernel.type) {
    case KernelType::kRbf: {
      const double s2 = p.kernel.bandwidth * p.kernel.bandwidth;
      for (Eigen::Index k = 0; k < KS.cols(); ++k)
        for (int t = 0; t < n; ++t)
          KS(t, k) = std::exp(-std::max(0.0, sq[t] + sq[sup[k]] - 2 * G(t, k)) / s2);
      kdiag.setOnes();
      break;
    }
    case KernelType::kLinear:
      KS = G;
      kdiag = sq;
      break;
    case KernelType::kPoly:
      for (Eigen::Index k = 0; k < KS.cols(); ++k)
        for (int t = 0; t < n; ++t) KS(t, k) = std::pow(G(t, k) + p.kernel.coef0, p.kernel.degree);
      for (int t = 0; t < n; ++t) kdiag[t] = std::pow(sq[t] + p.kernel.coef0, p.kernel.degree);
      break;
  }
  const Eigen::VectorXd ka = KS * aS;
  // An empty token set (every token removed) has no K_ii: scale 1, and no violation below.
  double scale = n > 0 ? std::max(1.0, kdiag.maxCoeff()) : 1.0;
  double worst = 0.0;
  for (int t = 0; t < n; ++t) {
    const double g = ka[t] + p.ridge * state.alpha[t] - kdiag[t] / 2 + state.b;
    const double a = state.alpha[t];
    double v;
    if (warm)
      v = std::max(0.0, g);
    else if (a == 0)
      v = std::max(0.0, -g);
    else if (a == C)
      v = std::max(0.0, g);
    else
      v = std::abs(g);
    worst = std::max(worst, v);
  }
  rep.kkt.max_violation = worst;
  // Accept violations up to 1e-8 * scale: the canonical refinement's own acceptance is tighter
  // (docs/math.md); this bound proves the state is an eps-KKT point of the stated problem.
  rep.kkt_ok = worst <= 1e-8 * scale;

  if (warm) {
    rep.unique = true;
    rep.uniqueness_reason = "warm-up: n*C <= 1 leaves a single feasible point";
  } else if (p.ridge > 0) {
    rep.unique = true;
    rep.uniqueness_reason = "ridge > 0: the objective is strictly convex";
  } else if (p.kernel.type == KernelType::kRbf) {
    std::vector<std::vector<double>> keys;
    bool distinct = true;
    std::vector<int> idx(n);
    for (int r = 0; r < n; ++r) idx[r] = r;
    std::sort(idx.begin(), idx.end(), [&](int a, int b) {
      return std::lexicographical_compare(tokens.keys.row(a).data(), tokens.keys.row(a).data() + d,
                                          tokens.keys.row(b).data(), tokens.keys.row(b).data() + d);
    });
    for (int r = 1; r < n && distinct; ++r)
      distinct = !std::equal(tokens.keys.row(idx[r]).data(), tokens.keys.row(idx[r]).data() + d,
                             tokens.keys.row(idx[r - 1]).data());
    rep.unique = distinct;
    rep.uniqueness_reason = distinct ? "RBF Gram matrix of distinct keys is positive definite"
                                     : "duplicate keys with ridge = 0: optimum may not be unique";
  } else {
    rep.unique = false;
    rep.uniqueness_reason = "ridge = 0 with a linear/poly kernel: uniqueness not established";
  }

  if (resolve) {
    BatchSettings bs;
    bs.problem = p;
    bs.tolerances = tol;
    BatchResult br = solve_batch(tokens, bs);
    rep.resolved = true;
    rep.resolve_sha256 = br.state.state_sha256;
    rep.resolve_hash_equal = br.state.state_sha256 == state.state_sha256;
    rep.resolve_partition_equal = br.state.partition == state.partition;
    double da = 0.0;
    if (br.state.ids == state.ids)
      for (size_t t = 0; t < state.alpha.size(); ++t)
        da = std::max(da, std::abs(br.state.alpha[t] - state.alpha[t]));
    else
      da = std::numeric_limits<double>::infinity();
    rep.resolve_max_abs_dalpha = da;
  }
  return rep;
}

namespace {
nlohmann::json sizes(const State& s) {
  return {{"n", s.ids.size()},
          {"margin", s.partition.margin.size()},
          {"error", s.partition.error.size()},
          {"reserve", s.partition.reserve.size()}};
}
}  // namespace

nlohmann::json removal_certificate(const State& before, const Memory& after_memory,
                                   const std::vector<TokenId>& removed,
                                   const std::string& record_id, const OpDiagnostics& diag,
                                   bool check, const RowMatrix& probes) {
  const State after = after_memory.state();
  const MemorySettings& ms = after_memory.settings();
  nlohmann::json j;
  j["certificate"] = "svattn-removal-v1";
  j["mode"] = to_string(ms.mode);
  j["settings"] = settings_to_json(ms.problem);
  j["record_id"] = record_id;
  std::vector<TokenId> rem = removed;
  std::sort(rem.begin(), rem.end());
  j["removed_ids"] = rem;
  nlohmann::json jb = sizes(before);
  jb["state_sha256"] = before.state_sha256;
  j["before"] = jb;
  nlohmann::json ja = sizes(after);
  ja["state_sha256"] = after.state_sha256;
  ja["status"] = to_string(after.status);
  ja["kkt"] = {{"max_violation", after.kkt.max_violation},
               {"sum_error", after.kkt.sum_error},
               {"box_violation", after.kkt.box_violation}};
  j["after"] = ja;
  j["solver"] = {{"events", diag.events},
                 {"zero_steps", diag.zero_steps},
                 {"refused_entrants", diag.refused_entrants},
                 {"refactorizations", diag.refactorizations},
                 {"canonical_solves", diag.canonical_solves},
                 {"repairs", diag.repairs},
                 {"batch_fallbacks", diag.batch_fallbacks},
                 {"boundary_solves", diag.boundary_solves},
                 {"tracked", diag.tracked},
                 {"kernel_evaluations", diag.kernel_evaluations},
                 {"status", to_string(diag.status)},
                 {"seconds", diag.seconds},
                 {"canonical_seconds", diag.canonical_seconds}};
  j["evictions"] = after_memory.evictions();
  const TokenSet remaining = after_memory.tokens();
  if (check) {
    // Independent verification from the tokens alone (O(n |S u E| d)).
    const VerifyReport vr = verify_state(remaining, after, ms.tolerances, false);
    j["verify"] = {{"performed", true},    {"feasible", vr.feasible},
                   {"kkt_ok", vr.kkt_ok},  {"max_kkt_violation", vr.kkt.max_violation},
                   {"unique", vr.unique},  {"uniqueness_reason", vr.uniqueness_reason},
                   {"hash_ok", vr.hash_ok}};
  } else {
    j["verify"] = {{"performed", false},
                   {"note",
                    "run `svattn memory verify` or verify_state() to check this state "
                    "independently"}};
  }
  nlohmann::json jc;
  jc["performed"] = check;
  if (check) {
    BatchSettings bs;
    bs.problem = ms.problem;
    bs.tolerances = ms.tolerances;
    const BatchResult br = solve_batch(remaining, bs);
    jc["retrained_sha256"] = br.state.state_sha256;
    jc["hash_equal"] = br.state.state_sha256 == after.state_sha256;
    jc["partition_equal"] = br.state.partition == after.partition;
    double da = 0.0;
    if (br.state.ids == after.ids) {
      for (size_t t = 0; t < after.alpha.size(); ++t)
        da = std::max(da, std::abs(br.state.alpha[t] - after.alpha[t]));
    } else {
      da = std::numeric_limits<double>::infinity();
    }
    jc["max_abs_dalpha"] = da;
    double dd = 0.0, dr = 0.0;
    if (remaining.size() > 0 && probes.rows() > 0) {
      const Support sup = support_of(br.state, remaining);
      for (Eigen::Index q = 0; q < probes.rows(); ++q) {
        const Eigen::VectorXd qv = probes.row(q).transpose();
        dd = std::max(dd, std::abs(after_memory.decision(qv) -
                                   decision_function(ms.problem.kernel, sup, br.state.b, qv)));
        const Eigen::VectorXd o1 = after_memory.readout(qv);
        const Eigen::VectorXd o2 = readout(ms.problem.kernel, sup, qv);
        dr = std::max(dr, (o1 - o2).cwiseAbs().maxCoeff());
      }
    }
    jc["max_abs_ddecision"] = dd;
    jc["max_abs_dreadout"] = dr;
    jc["probes"] = probes.rows();
    jc["retrain_seconds"] = br.diagnostics.smo_seconds + br.diagnostics.refine_seconds;
  }
  j["check"] = jc;
  if (ms.mode == MemoryMode::kAudit && after_memory.evictions() > 0) {
    j["scope"] =
        "audit mode, but " + std::to_string(after_memory.evictions()) +
        " reserve token(s) were evicted from this memory earlier (evict_reserve): the state equals "
        "the optimum on the retained tokens minus the removed ones. An evicted token might have "
        "re-entered the support after this removal, so exactness is relative to the retained "
        "tokens only.";
  } else if (ms.mode == MemoryMode::kAudit) {
    j["scope"] =
        "audit mode: the state after removal equals the optimum on every token ever ingested minus "
        "the removed ones (exact forgetting under the same fixed C, ridge and kernel).";
  } else {
    j["scope"] =
        "bounded mode: reserve tokens were evicted earlier; the state equals the optimum on the "
        "retained tokens minus the removed ones. An evicted token might have re-entered the "
        "support after this removal, so exactness is relative to the retained tokens only.";
  }
  j["limits"] =
      "The certificate covers this memory's state and outputs. It covers a model's outputs only "
      "where keys and values are computed per record; if a deep model mixed the record into other "
      "tokens before the memory, those activations still depend on it.";
  return j;
}

}  // namespace svattn
