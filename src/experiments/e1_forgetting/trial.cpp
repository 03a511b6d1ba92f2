// One E1 trial: a stream's tokens ingested, every deletion scenario run decrementally and compared
// with retraining from scratch and with coefficient decay (docs/experiments.md "E1").
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "common.h"
#include "svattn/batch_solver.h"
#include "svattn/errors.h"
#include "experiments/e1_forgetting/e1_forgetting.h"
#include "experiments/registry.h"
#include "experiments/icu.h"
#include "experiments/report.h"
#include "experiments/streams.h"
#include "svattn/io.h"
#include "svattn/memory.h"
#include "svattn/readout.h"
#include "internal.h"

namespace svattn::experiments::e1_forgetting {
namespace {

struct TrialStream {
  RowMatrix keys;
  RowMatrix values;
  std::vector<int> record;
};

/// A support built from explicit coefficients over a token set (ascending ids).
Support support_from(const TokenSet& tokens, const std::vector<double>& alpha) {
  std::vector<int> rows;
  for (int i = 0; i < tokens.size(); ++i)
    if (alpha[static_cast<std::size_t>(i)] > 0) rows.push_back(i);
  Support s;
  s.keys.resize(static_cast<Eigen::Index>(rows.size()), tokens.keys.cols());
  s.values.resize(static_cast<Eigen::Index>(rows.size()), tokens.values.cols());
  s.alpha.resize(static_cast<Eigen::Index>(rows.size()));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    s.keys.row(static_cast<Eigen::Index>(r)) = tokens.keys.row(rows[r]);
    s.values.row(static_cast<Eigen::Index>(r)) = tokens.values.row(rows[r]);
    s.alpha(static_cast<Eigen::Index>(r)) = alpha[static_cast<std::size_t>(rows[r])];
  }
  return s;
}

/// Tokens sorted by id (the order of State::ids).
TokenSet sorted_by_id(const TokenSet& t) {
  std::vector<int> order(static_cast<std::size_t>(t.size()));
  for (int i = 0; i < t.size(); ++i) order[static_cast<std::size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return t.ids[a] < t.ids[b]; });
  TokenSet s;
  s.keys.resize(t.keys.rows(), t.keys.cols());
  s.values.resize(t.values.rows(), t.values.cols());
  for (std::size_t r = 0; r < order.size(); ++r) {
    s.ids.push_back(t.ids[static_cast<std::size_t>(order[r])]);
    s.keys.row(static_cast<Eigen::Index>(r)) = t.keys.row(order[r]);
    s.values.row(static_cast<Eigen::Index>(r)) = t.values.row(order[r]);
  }
  return s;
}

struct FunctionValues {
  std::vector<double> f;
  std::vector<Eigen::VectorXd> o;
};

FunctionValues evaluate(const KernelSettings& k, const Support& s, double b, const RowMatrix& probes) {
  FunctionValues v;
  for (Eigen::Index p = 0; p < probes.rows(); ++p) {
    const Eigen::VectorXd q = probes.row(p).transpose();
    v.f.push_back(decision_function(k, s, b, q));
    v.o.push_back(readout(k, s, q));
  }
  return v;
}

void deviations(const FunctionValues& a, const FunctionValues& b, double& df, double& dout) {
  df = 0;
  dout = 0;
  for (std::size_t p = 0; p < a.f.size(); ++p) {
    df = std::max(df, std::abs(a.f[p] - b.f[p]));
    const double d = (a.o[p] - b.o[p]).cwiseAbs().maxCoeff();
    dout = std::max(dout, std::isnan(d) ? std::numeric_limits<double>::infinity() : d);
  }
}

/// The coefficient-decay baseline: coefficients of the removed tokens multiplied by `factor`
/// (0 = zeroing), all coefficients renormalised to sum 1, b refitted as the mean over the surviving
/// margin tokens of K_ii/2 - ((K + mu I) a')_i (the b that best satisfies g = 0 there; left
/// unchanged when no coefficient mass was removed). No re-solve. Returns coefficients aligned with
/// `all` (ascending ids) and b.
std::pair<std::vector<double>, double> decay_state(const State& before, const TokenSet& all,
                                                   const std::vector<char>& removed, double factor) {
  std::vector<double> a = before.alpha;
  double mass = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (removed[i]) {
      mass += a[i] * (1.0 - factor);
      a[i] *= factor;
    }
  }
  if (mass == 0.0) return {a, before.b};
  const double total = 1.0 - mass;
  for (double& x : a) x /= total;
  const KernelSettings& k = before.settings.kernel;
  const double mu = before.settings.ridge;
  const int d = static_cast<int>(all.keys.cols());
  double bsum = 0;
  int count = 0;
  for (TokenId id : before.partition.margin) {
    const auto i = static_cast<std::size_t>(
        std::lower_bound(all.ids.begin(), all.ids.end(), id) - all.ids.begin());
    if (removed[i]) continue;
    double ka = mu * a[i];
    for (std::size_t j = 0; j < a.size(); ++j) {
      if (a[j] > 0) {
        ka += a[j] * kernel(k, all.keys.row(static_cast<Eigen::Index>(i)).data(),
                            all.keys.row(static_cast<Eigen::Index>(j)).data(), d);
      }
    }
    const double kii = kernel(k, all.keys.row(static_cast<Eigen::Index>(i)).data(),
                              all.keys.row(static_cast<Eigen::Index>(i)).data(), d);
    bsum += kii / 2 - ka;
    ++count;
  }
  return {a, count > 0 ? bsum / count : before.b};
}

/// Picks the ids removed by a scenario; empty when the scenario is not applicable (e.g. no error
/// tokens in this trial).
std::vector<TokenId> pick(const std::string& scenario, const State& st, const TrialStream& ts,
                          Rng& rng) {
  auto one_of = [&](const std::vector<TokenId>& pool) -> std::vector<TokenId> {
    if (pool.empty()) return {};
    return {pool[rng.below(pool.size())]};
  };
  const int n = static_cast<int>(ts.keys.rows());
  if (scenario == "margin") return one_of(st.partition.margin);
  if (scenario == "error") return one_of(st.partition.error);
  if (scenario == "reserve") return one_of(st.partition.reserve);
  if (scenario == "random_set") {
    const int k = std::max(2, n / 20);
    std::vector<TokenId> out;
    for (int i : sample_without_replacement(n, k, rng)) out.push_back(i);
    return out;
  }
  // record: all rows of one record
  const int records = *std::max_element(ts.record.begin(), ts.record.end()) + 1;
  const int r = static_cast<int>(rng.below(static_cast<std::uint64_t>(records)));
  std::vector<TokenId> out;
  for (int i = 0; i < n; ++i)
    if (ts.record[static_cast<std::size_t>(i)] == r) out.push_back(i);
  return out;
}

std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// Writes the tokens, the removed ids and the settings of a deletion whose result differs from
/// retraining, with the `svattn forget-check` command that replays it. Returns the folder name
/// relative to the output directory.
std::string write_repro(const ExperimentOptions& o, const Comparison& c, const TokenSet& all,
                        const std::vector<TokenId>& removed, const ProblemSettings& ps,
                        const State& dec, const State& re) {
  const std::string& sha_decremental = dec.state_sha256;
  const std::string& sha_retrained = re.state_sha256;
  // Tokens whose set (margin/error/reserve) differs between the two states.
  auto set_of = [](const Partition& p, TokenId id) {
    if (std::binary_search(p.margin.begin(), p.margin.end(), id)) return "margin";
    if (std::binary_search(p.error.begin(), p.error.end(), id)) return "error";
    return "reserve";
  };
  nlohmann::json diffs = nlohmann::json::array();
  for (std::size_t i = 0; i < dec.ids.size(); ++i) {
    const std::string a = set_of(dec.partition, dec.ids[i]);
    const std::string b = set_of(re.partition, re.ids[i]);
    if (a != b || dec.alpha[i] != re.alpha[i]) {
      if (diffs.size() < 50) {
        diffs.push_back({{"id", dec.ids[i]}, {"decremental_set", a}, {"retrained_set", b},
                         {"alpha_decremental", dec.alpha[i]}, {"alpha_retrained", re.alpha[i]}});
      }
    }
  }
  const std::string rel = "E1-repro/" + c.stream + "-trial" + std::to_string(c.trial) + "-" + c.scenario;
  const std::filesystem::path dir = std::filesystem::path(o.out_dir) / rel;
  ensure_dir(dir.string());
  write_npy((dir / "keys.npy").string(), all.keys);
  write_npy((dir / "values.npy").string(), all.values);
  std::string rows;
  for (TokenId id : removed) rows += (rows.empty() ? "" : ",") + std::to_string(id);
  const std::string problem = " --kernel rbf --bandwidth " + exact(ps.kernel.bandwidth) + " --C " +
                              exact(ps.C) + " --ridge " + exact(ps.ridge);
  // The experiment's exact operation sequence: one add per token, then one removal.
  std::string ops = "# E1 " + c.stream + " trial " + std::to_string(c.trial) + " " + c.scenario + "\n";
  for (int i = 0; i < all.size(); ++i) ops += "add " + std::to_string(all.ids[static_cast<std::size_t>(i)]) + "\n";
  ops += "remove " + rows + "\n";
  write_text_file((dir / "ops.txt").string(), ops);
  const std::string replay = "svattn replay --keys keys.npy --values values.npy --ops ops.txt" + problem + " --json";
  const std::string cmd = "svattn forget-check --keys keys.npy --values values.npy --remove " + rows + problem;
  write_json_file((dir / "repro.json").string(),
                  {{"stream", c.stream}, {"trial", c.trial}, {"scenario", c.scenario},
                   {"removed", removed}, {"bandwidth", ps.kernel.bandwidth}, {"C", ps.C},
                   {"ridge", ps.ridge}, {"ingestion", "Memory::add one token at a time, ids 0..n-1"},
                   {"removal", removed.size() == 1 ? "Memory::remove" : "Memory::remove_batch"},
                   {"replay_command", replay}, {"forget_check_command", cmd},
                   {"sha256_decremental", sha_decremental}, {"sha256_retrained", sha_retrained},
                   {"b_decremental", dec.b}, {"b_retrained", re.b},
                   {"kkt_decremental", {{"max_violation", dec.kkt.max_violation}, {"sum_error", dec.kkt.sum_error}}},
                   {"kkt_retrained", {{"max_violation", re.kkt.max_violation}, {"sum_error", re.kkt.sum_error}}},
                   {"differences_first_50", diffs},
                   {"comparison", c.to_json()}});
  write_text_file((dir / "README.md").string(),
                  "E1 deletion whose decremental state differs from retraining from scratch.\n\n"
                  "The experiment's exact sequence (one add per token, then the removal); its final "
                  "state_sha256 was " + sha_decremental + ", retraining gives " + sha_retrained +
                  ":\n\n    " + replay + "\n\nThe same removal after a batch ingestion (add_batch), "
                  "compared with retraining:\n\n    " + cmd + "\n");
  return rel;
}

TrialStream make_trial(const StreamDef& def, const StreamData& data, int n, Rng& rng) {
  TrialStream t;
  if (def.kind == "gaussian") {
    t.keys = gaussian_keys(n, def.d, 1.0, rng);
  } else if (def.kind == "clustered") {
    t.keys = clustered_keys(n, def.d, 5, rng);
  } else if (def.kind == "near_duplicate") {
    t.keys = near_duplicate_keys(n, def.d, rng);
  } else if (def.kind == "learned") {
    const int rows = static_cast<int>(data.learned.rows());
    const int m = std::min(n, rows);
    const int off = static_cast<int>(rng.below(static_cast<std::uint64_t>(rows - m + 1)));
    t.keys = data.learned.middleRows(off, m);
  } else {  // ICU: random stays concatenated up to n hours (the last one cut)
    const IcuKeys& icu = *data.icu;
    std::vector<int> order(static_cast<std::size_t>(icu.stays()));
    for (int s = 0; s < icu.stays(); ++s) order[static_cast<std::size_t>(s)] = s;
    shuffle_in_place(order, rng);
    std::vector<int> rows;
    int rec = 0;
    for (int s : order) {
      for (int r = icu.stay_begin[static_cast<std::size_t>(s)];
           r < icu.stay_begin[static_cast<std::size_t>(s) + 1] && static_cast<int>(rows.size()) < n; ++r) {
        rows.push_back(r);
        t.record.push_back(rec);
      }
      ++rec;
      if (static_cast<int>(rows.size()) >= n) break;
    }
    t.keys.resize(static_cast<Eigen::Index>(rows.size()), icu.keys.cols());
    for (std::size_t i = 0; i < rows.size(); ++i) t.keys.row(static_cast<Eigen::Index>(i)) = icu.keys.row(rows[i]);
  }
  const int m = static_cast<int>(t.keys.rows());
  if (t.record.empty()) {
    for (int i = 0; i < m; ++i) t.record.push_back(i / kRecordSize);
  }
  t.values = gaussian_keys(m, kValueDim, 1.0, rng);
  return t;
}

/// A trial's problem: RBF with σ = median pairwise distance of its keys, C = 1 / (kNu n), audit.
MemorySettings trial_settings(const RowMatrix& keys, Rng& rng) {
  const int n = static_cast<int>(keys.rows());
  MemorySettings ms;
  ms.problem.kernel.type = KernelType::kRbf;
  ms.problem.kernel.bandwidth = median_pairwise_distance(keys, 400, rng);
  ms.problem.C = 1.0 / (kNu * n);
  ms.mode = MemoryMode::kAudit;
  ms.validate();
  return ms;
}

/// Probes: keys of the stream and Gaussian points around it (per-dimension mean and spread).
RowMatrix make_probes(const RowMatrix& keys, Rng& rng) {
  const int n = static_cast<int>(keys.rows());
  const int d = static_cast<int>(keys.cols());
  RowMatrix probes(kProbesOnKeys + kProbesAround, d);
  const std::vector<int> rows = sample_without_replacement(n, std::min(kProbesOnKeys, n), rng);
  const Eigen::RowVectorXd mean = keys.colwise().mean();
  const Eigen::RowVectorXd sd =
      ((keys.rowwise() - mean).array().square().colwise().sum() / std::max(1, n - 1)).sqrt();
  for (int p = 0; p < kProbesOnKeys; ++p) {
    probes.row(p) = keys.row(rows[static_cast<std::size_t>(p) % rows.size()]);
  }
  for (int p = 0; p < kProbesAround; ++p)
    for (int j = 0; j < d; ++j) probes(kProbesOnKeys + p, j) = mean(j) + sd(j) * rng.normal();
  return probes;
}

/// What every deletion of one trial starts from and is compared on.
struct TrialContext {
  const MemorySettings& ms;
  const TokenSet& all;  // every token, ids 0 .. n-1
  const Memory& mem;    // all of them ingested one at a time
  const State& before;  // mem.state()
  const RowMatrix& probes;
};

/// The coefficient-decay baselines (zeroing, multiplicative) from the state before the removal,
/// against the retrained state `re` and its values `f_re` on the probes.
void add_decay_baselines(Comparison& c, const TrialContext& t, const std::vector<TokenId>& removed,
                         const State& re, const FunctionValues& f_re) {
  const int n = static_cast<int>(t.all.keys.rows());
  std::vector<char> is_removed(static_cast<std::size_t>(n), 0);
  for (TokenId id : removed) is_removed[static_cast<std::size_t>(id)] = 1;
  for (TokenId id : removed) c.removed_mass += t.before.alpha[static_cast<std::size_t>(id)];
  for (int variant = 0; variant < 2; ++variant) {
    const double factor = variant == 0 ? 0.0 : kDecayFactor;
    const auto [a, b] = decay_state(t.before, t.all, is_removed, factor);
    double da = 0;
    std::size_t k = 0;
    for (int i = 0; i < n; ++i) {
      if (is_removed[static_cast<std::size_t>(i)]) continue;
      da = std::max(da, std::abs(a[static_cast<std::size_t>(i)] - re.alpha[k]));
      ++k;
    }
    const FunctionValues f_dc = evaluate(t.ms.problem.kernel, support_from(t.all, a), b, t.probes);
    double df = 0, dout = 0;
    deviations(f_dc, f_re, df, dout);
    if (variant == 0) {
      c.decay_dalpha = da;
      c.decay_ddecision = df;
      c.decay_dreadout = dout;
    } else {
      c.mult_dalpha = da;
      c.mult_ddecision = df;
      c.mult_dreadout = dout;
    }
  }
}

/// Removes `removed` from a copy of the trial's memory and compares the result with retraining on
/// the remaining tokens and with the decay baselines; `c` names the stream, trial and scenario.
Comparison compare_deletion(Comparison c, const TrialContext& t, const std::vector<TokenId>& removed,
                            const ExperimentOptions& o) {
  c.removed = static_cast<int>(removed.size());
  Memory m2 = t.mem;
  const Stopwatch rw;
  const OpDiagnostics dg = removed.size() == 1 ? m2.remove(removed[0]) : m2.remove_batch(removed);
  c.remove_seconds = rw.seconds();
  c.events = dg.events;
  c.repairs = dg.repairs;
  c.fallbacks = dg.batch_fallbacks;
  c.status = to_string(m2.status());
  const State after = m2.state();
  const TokenSet remaining = t.all.without(removed);
  BatchSettings bs;
  bs.problem = t.ms.problem;
  bs.tolerances = t.ms.tolerances;
  const Stopwatch bw;
  const BatchResult re = solve_batch(remaining, bs);
  c.retrain_seconds = bw.seconds();
  c.partition_equal = after.partition == re.state.partition;
  c.hash_equal = after.state_sha256 == re.state.state_sha256;
  if (after.ids != re.state.ids) throw std::runtime_error("E1: decremental and retrained ids differ");
  for (std::size_t i = 0; i < after.alpha.size(); ++i)
    c.dalpha = std::max(c.dalpha, std::abs(after.alpha[i] - re.state.alpha[i]));
  // Both states are evaluated by the same functions, so equal states give equal values.
  const KernelSettings& ks = t.ms.problem.kernel;
  const TokenSet rem_sorted = sorted_by_id(remaining);
  const FunctionValues f_re = evaluate(ks, support_of(re.state, rem_sorted), re.state.b, t.probes);
  const FunctionValues f_dec = evaluate(ks, support_of(after, m2.tokens()), after.b, t.probes);
  deviations(f_dec, f_re, c.ddecision, c.dreadout);
  // A measurement artefact beside the report (the report only names the folder): the tokens and
  // the replay command of a state that is not bit-identical to retraining.
  if (!c.hash_equal) c.repro = write_repro(o, c, t.all, removed, t.ms.problem, after, re.state);
  add_decay_baselines(c, t, removed, re.state, f_re);
  return c;
}

}  // namespace

/// Reads the data a stream's trials share. False, with the reason in `sum`, for the learned stream
/// without keys (pending).
bool load_stream_data(const StreamDef& def, const ExperimentOptions& o, const DataDir* data_dir,
                      const std::string& keys_error, StreamResult& sum, StreamData& data) {
  if (def.kind == "learned") {
    if (o.learned_keys.empty()) {
      sum.status = "pending";
      sum.pending_reason = !keys_error.empty() ? "pending: training the keys' model failed: " + keys_error :
          o.preset == "tiny"
              ? "pending: the tiny preset trains no model (keys_steps = 0); pass --learned-keys FILE"
              : "pending: needs keys of a trained model: a LibTorch build trains (or reuses) a small "
                "hybrid for them, or pass --learned-keys FILE (`svattn dump-keys`)";
      return false;
    }
    data.learned = read_matrix(o.learned_keys);
    data.source = o.learned_keys;
    sum.description = "keys of a trained model from '" + o.learned_keys + "' (" +
                      std::to_string(data.learned.rows()) + " x " +
                      std::to_string(data.learned.cols()) + "), contiguous windows";
  } else if (def.kind == "icu_mimic") {
    data.icu = icu_keys(load_mimic_vitals(data_file(*data_dir, "mimic-iii-demo/vitals.csv.gz")));
  } else if (def.kind == "icu_physionet2012") {
    data.icu = icu_keys(load_physionet2012({data_file(*data_dir, "physionet2012/set-a.tar.gz"),
                                            data_file(*data_dir, "physionet2012/set-b.tar.gz")}));
  }
  return true;
}

/// Trial `t` of a stream: ingests its tokens, then runs every applicable deletion scenario.
void run_trial(const StreamDef& def, const ExperimentOptions& o, const StreamData& data, int n_tokens,
               int t, StreamResult& sum, std::vector<double>& sigmas) {
  Rng rng(derive_seed(o.seed, detail::name_hash(def.name) * 1000003ULL + static_cast<std::uint64_t>(t)));
  const TrialStream ts = make_trial(def, data, n_tokens, rng);
  const int n = static_cast<int>(ts.keys.rows());
  sum.n = n;
  sum.d = static_cast<int>(ts.keys.cols());
  const MemorySettings ms = trial_settings(ts.keys, rng);
  sigmas.push_back(ms.problem.kernel.bandwidth);
  sum.C = ms.problem.C;
  TokenSet all;
  all.keys = ts.keys;
  all.values = ts.values;
  for (int i = 0; i < n; ++i) all.ids.push_back(i);
  Memory mem(ms, sum.d, kValueDim);
  for (int i = 0; i < n; ++i) mem.add(i, ts.keys.row(i).transpose(), ts.values.row(i).transpose());
  const State before = mem.state();
  const RowMatrix probes = make_probes(ts.keys, rng);
  const TrialContext ctx{ms, all, mem, before, probes};
  for (const auto& scenario : kScenarios) {
    const std::vector<TokenId> removed = pick(scenario, before, ts, rng);
    if (removed.empty()) continue;  // e.g. no error token in this trial
    Comparison c;
    c.stream = def.name;
    c.trial = t;
    c.scenario = scenario;
    sum.comparisons.push_back(compare_deletion(c, ctx, removed, o));
  }
}

}  // namespace svattn::experiments::e1_forgetting
