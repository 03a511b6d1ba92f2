// E1 — exact forgetting: every trial streams keys into an audit-mode svattn::Memory, removes tokens
// decrementally (a margin, an error and a reserve token, a random set, one record) and compares the
// result with retraining from scratch (svattn::solve_batch on the remaining tokens), and with the
// coefficient-decay baseline (no re-solve). measure() runs the trials into a typed Result;
// render() writes E1.md, E1.json and the plots from that Result alone.
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
#include "svattn/experiments/e1_forgetting/e1_forgetting.h"
#include "svattn/experiments/registry.h"
#include "svattn/experiments/icu.h"
#include "svattn/experiments/report.h"
#include "svattn/experiments/streams.h"
#include "svattn/io.h"
#include "svattn/memory.h"
#include "svattn/readout.h"

namespace svattn::experiments::e1_forgetting {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Settings, n, trials, streams, keys_model, keys_steps, keys_tokens)

namespace {

constexpr double kNu = 0.1;             // C = 1 / (kNu n): >= 10 % of tokens carry weight
constexpr int kValueDim = 4;            // values ~ N(0, I_4), independent of the keys
constexpr int kRecordSize = 10;         // synthetic/learned "record" = 10 consecutive tokens
constexpr double kDecayFactor = 0.1;    // multiplicative-decay variant: alpha_D *= 0.1
constexpr int kProbesOnKeys = 32;       // probes: remaining keys ...
constexpr int kProbesAround = 32;       // ... and Gaussian probes around the data

struct StreamDef {
  std::string name;
  std::string kind;  // gaussian | clustered | near_duplicate | icu_mimic | icu_physionet2012 | learned
  int d = 0;         // 0 = given by the data
  std::string description;
};

const std::vector<StreamDef>& all_streams() {
  static const std::vector<StreamDef> s = {
      {"gaussian_d2", "gaussian", 2, "i.i.d. N(0, I), d = 2"},
      {"gaussian_d8", "gaussian", 8, "i.i.d. N(0, I), d = 8"},
      {"gaussian_d32", "gaussian", 32, "i.i.d. N(0, I), d = 32"},
      {"gaussian_d64", "gaussian", 64, "i.i.d. N(0, I), d = 64"},
      {"clustered", "clustered", 8, "5 clusters, centres N(0, 16 I), spread 0.3, d = 8"},
      {"near_duplicate", "near_duplicate", 8,
       "every other key a twin of an earlier key at distance ~1e-9..1e-6, d = 8"},
      {"icu_mimic", "icu_mimic", kNumVitals,
       "MIMIC-III demo vitals, hourly, 7 standardised vitals; record = one ICU stay"},
      {"icu_physionet2012", "icu_physionet2012", kNumVitals,
       "PhysioNet/CinC 2012 sets A+B, hourly, 7 standardised vitals; record = one ICU stay"},
      {"learned", "learned", 0, "keys of a trained model (svattn dump-keys), contiguous windows"},
  };
  return s;
}

Settings preset_for(const std::string& name) {
  if (name == "tiny") {
    return {40, 2, {"gaussian_d2", "gaussian_d8", "clustered", "near_duplicate", "learned"}, "tiny", 0, 0};
  }
  if (name == "paper") {
    return {1000, 100,
            {"gaussian_d2", "gaussian_d8", "gaussian_d32", "gaussian_d64", "clustered",
             "near_duplicate", "icu_mimic", "icu_physionet2012", "learned"},
            "tiny", 1500, 4096};
  }
  return {400, 25,
          {"gaussian_d2", "gaussian_d8", "gaussian_d32", "clustered", "near_duplicate", "icu_mimic",
           "learned"},
          "tiny", 200, 2048};
}

const StreamDef& stream_def(const std::string& name) {
  for (const auto& s : all_streams())
    if (s.name == name) return s;
  std::string known;
  for (const auto& s : all_streams()) known += (known.empty() ? "" : ", ") + s.name;
  throw InvalidArgument("unknown E1 stream '" + name + "' (known: " + known + ")");
}

/// One trial's tokens: keys, values and the record each row belongs to.
struct TrialStream {
  RowMatrix keys;
  RowMatrix values;
  std::vector<int> record;
};

const std::vector<std::string> kScenarios = {"margin", "error", "reserve", "random_set", "record"};

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

/// Loaded data shared by the trials of a stream.
struct StreamData {
  std::optional<IcuKeys> icu;
  RowMatrix learned;
  std::string source;
};

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

StreamResult run_stream(const StreamDef& def, const ExperimentOptions& o, int n_tokens,
                        const DataDir* data_dir, int trials, const std::string& keys_error) {
  StreamResult sum;
  sum.name = def.name;
  sum.description = def.description;
  StreamData data;
  if (!load_stream_data(def, o, data_dir, keys_error, sum, data)) return sum;
  sum.trials = trials;
  const Stopwatch watch;
  Progress progress("E1 " + def.name, trials, "trials", o.progress);
  std::vector<double> sigmas;
  for (int t = 0; t < trials; ++t) {
    run_trial(def, o, data, n_tokens, t, sum, sigmas);
    progress.tick();
  }
  progress.finish();
  sum.sigma_median = median_of(sigmas);
  sum.seconds = watch.seconds();
  return sum;
}

/// The learned keys' file: options.learned_keys; else, when the learned stream is selected and
/// the preset trains (quick, paper), the file the LibTorch build's source trains or reuses
/// (registry.h); else empty. A failed training leaves it empty with the reason in `error` (the
/// other streams still run, e.g. without enwik8).
std::string learned_keys_for(const ExperimentOptions& o, const Result& res, std::string& error) {
  const auto& names = res.selected_streams;
  const bool wants_learned = std::find(names.begin(), names.end(), "learned") != names.end();
  if (!wants_learned || !o.learned_keys.empty() || res.settings.keys_steps <= 0 || !learned_keys_source())
    return o.learned_keys;
  LearnedKeysSpec spec;
  spec.model = res.settings.keys_model;
  spec.steps = res.settings.keys_steps;
  spec.tokens = std::max<std::int64_t>(res.settings.keys_tokens, res.settings.n);
  try {
    return learned_keys_source()(o, spec);
  } catch (const Error& e) {
    error = e.what();
    return "";
  }
}

/// The data directory when a selected stream reads ICU data.
std::optional<DataDir> icu_data_dir(const std::vector<std::string>& names, const ExperimentOptions& o) {
  for (const auto& nm : names) {
    const std::string kind = stream_def(nm).kind;
    if (kind == "icu_mimic" || kind == "icu_physionet2012") return resolve_data_dir(o.data_dir);
  }
  return std::nullopt;
}

/// Histogram bins of log10 deviations: "exactly 0", then decades 1e-17 .. 1e0, then ">= 1".
std::vector<std::string> hist_labels() {
  std::vector<std::string> l = {"exactly 0", "<1e-16"};
  for (int e = -16; e < 0; ++e) l.push_back("1e" + std::to_string(e));
  l.push_back(">=1");
  return l;
}

std::vector<double> histogram(const std::vector<double>& v) {
  std::vector<double> h(hist_labels().size(), 0.0);
  for (double x : v) {
    std::size_t bin;
    if (x == 0.0) {
      bin = 0;
    } else if (x < 1e-16) {
      bin = 1;
    } else if (x >= 1.0 || !std::isfinite(x)) {
      bin = h.size() - 1;
    } else {
      const int e = static_cast<int>(std::floor(std::log10(x)));  // -16 .. -1
      bin = static_cast<std::size_t>(2 + (e + 16));
    }
    h[bin] += 1;
  }
  return h;
}

std::string median_cell(const std::vector<double>& v) { return v.empty() ? "n/a" : fmt_sci(median_of(v)); }
std::string max_cell(const std::vector<double>& v) { return v.empty() ? "n/a" : fmt_sci(max_of(v)); }

// ------------------------------------------------------------------------- the report
// Everything below reads the Result only: no data, no solving.

double rate(const std::vector<Comparison>& cs, bool Comparison::*field) {
  if (cs.empty()) return std::nan("");
  long k = 0;
  for (const auto& c : cs) k += (c.*field) ? 1 : 0;
  return static_cast<double>(k) / static_cast<double>(cs.size());
}

std::vector<double> collect(const std::vector<Comparison>& cs, double Comparison::*field,
                            bool only_mass = false) {
  std::vector<double> v;
  for (const auto& c : cs)
    if (!only_mass || c.removed_mass > 0) v.push_back(c.*field);
  return v;
}

/// Every deletion of the streams that ran, stream by stream.
std::vector<Comparison> all_comparisons(const Result& res) {
  std::vector<Comparison> all;
  for (const auto& s : res.streams)
    if (s.status == "ok") all.insert(all.end(), s.comparisons.begin(), s.comparisons.end());
  return all;
}

bool learned_pending(const Result& res) {
  return std::any_of(res.streams.begin(), res.streams.end(), [](const StreamResult& s) {
    return s.name == "learned" && s.status != "ok";
  });
}

/// A table and its twin in E1.json.
struct TableJson {
  Table table;
  nlohmann::json json;
};

/// A stream's deletions as its row of the per-stream table and its entry of E1.json's `streams`.
struct StreamStats {
  double pm = 0, he = 0;  // partition match, hash identical rates
  std::vector<double> ddec, dro, dal, dz, dzo, dm;
  double t_rem = 0, t_re = 0;  // median remove / retrain seconds
  long repairs = 0, fallbacks = 0;
};

StreamStats stream_stats(const std::vector<Comparison>& cs) {
  StreamStats st;
  st.pm = rate(cs, &Comparison::partition_equal);
  st.he = rate(cs, &Comparison::hash_equal);
  st.ddec = collect(cs, &Comparison::ddecision);
  st.dro = collect(cs, &Comparison::dreadout);
  st.dal = collect(cs, &Comparison::dalpha);
  st.dz = collect(cs, &Comparison::decay_ddecision, true);
  st.dzo = collect(cs, &Comparison::decay_dreadout, true);
  st.dm = collect(cs, &Comparison::mult_ddecision, true);
  st.t_rem = median_of(collect(cs, &Comparison::remove_seconds));
  st.t_re = median_of(collect(cs, &Comparison::retrain_seconds));
  for (const auto& c : cs) {
    st.fallbacks += c.fallbacks;
    st.repairs += c.repairs;
  }
  return st;
}

nlohmann::json stream_summary_json(const StreamResult& s, const StreamStats& st) {
  return {{"n", s.n}, {"d", s.d}, {"sigma_median", s.sigma_median}, {"C", s.C},
          {"trials", s.trials}, {"deletions", s.comparisons.size()}, {"partition_match_rate", st.pm},
          {"hash_identical_rate", st.he},
          {"median_max_abs_ddecision", median_of(st.ddec)}, {"worst_max_abs_ddecision", max_of(st.ddec)},
          {"median_max_abs_dreadout", median_of(st.dro)}, {"worst_max_abs_dreadout", max_of(st.dro)},
          {"worst_max_abs_dalpha", max_of(st.dal)},
          {"decay_zero", {{"median_max_abs_ddecision", median_of(st.dz)},
                          {"worst_max_abs_ddecision", max_of(st.dz)},
                          {"median_max_abs_dreadout", median_of(st.dzo)},
                          {"deletions_with_removed_mass", st.dz.size()}}},
          {"decay_mult", {{"median_max_abs_ddecision", median_of(st.dm)},
                          {"worst_max_abs_ddecision", max_of(st.dm)}}},
          {"median_remove_seconds", st.t_rem}, {"median_retrain_seconds", st.t_re},
          {"repairs", st.repairs}, {"batch_fallbacks", st.fallbacks}, {"seconds", s.seconds}};
}

TableJson per_stream(const Result& res) {
  TableJson t{Table({"stream", "n", "d", "σ (median)", "C", "trials", "deletions", "partition match",
                     "hash identical", "median max|Δf|", "worst max|Δf|", "worst max|Δo|",
                     "worst max|Δα|", "decay: median max|Δf|", "decay: worst max|Δf|",
                     "mult-decay: median max|Δf|", "repairs / fallbacks", "retrain / remove time"}),
              nlohmann::json::array()};
  for (const auto& s : res.streams) {
    nlohmann::json sj = {{"name", s.name}, {"description", s.description}, {"status", s.status}};
    if (s.status != "ok") {
      sj["reason"] = s.pending_reason;
      t.table.add_row({s.name, "–", "–", "–", "–", "–", "–", s.pending_reason, "–", "–", "–", "–",
                       "–", "–", "–", "–", "–", "–"});
      t.json.push_back(sj);
      continue;
    }
    const StreamStats st = stream_stats(s.comparisons);
    t.table.add_row({s.name, std::to_string(s.n), std::to_string(s.d), fmt_fixed(s.sigma_median, 3),
                     fmt_sci(s.C), std::to_string(s.trials), std::to_string(s.comparisons.size()),
                     fmt_pct(st.pm), fmt_pct(st.he), median_cell(st.ddec), max_cell(st.ddec),
                     max_cell(st.dro), max_cell(st.dal), median_cell(st.dz), max_cell(st.dz),
                     median_cell(st.dm),
                     std::to_string(st.repairs) + " / " + std::to_string(st.fallbacks),
                     fmt_fixed(st.t_rem > 0 ? st.t_re / st.t_rem : std::nan(""), 1) + "×"});
    sj.update(stream_summary_json(s, st));
    t.json.push_back(sj);
  }
  return t;
}

TableJson per_kind(const std::vector<Comparison>& all) {
  TableJson t{Table({"deletion", "deletions", "mean tokens removed", "partition match",
                     "hash identical", "median max|Δf|", "worst max|Δf|", "decay: median max|Δf|",
                     "decay: worst max|Δf|"}),
              nlohmann::json::object()};
  for (const auto& sc : kScenarios) {
    std::vector<Comparison> cs;
    for (const auto& c : all)
      if (c.scenario == sc) cs.push_back(c);
    if (cs.empty()) continue;
    double mean_removed = 0;
    for (const auto& c : cs) mean_removed += c.removed;
    mean_removed /= static_cast<double>(cs.size());
    const auto ddec = collect(cs, &Comparison::ddecision);
    const auto dz = collect(cs, &Comparison::decay_ddecision);
    t.table.add_row({sc, std::to_string(cs.size()), fmt_fixed(mean_removed, 1),
                     fmt_pct(rate(cs, &Comparison::partition_equal)),
                     fmt_pct(rate(cs, &Comparison::hash_equal)), median_cell(ddec), max_cell(ddec),
                     median_cell(dz), max_cell(dz)});
    t.json[sc] = {{"deletions", cs.size()},
                  {"partition_match_rate", rate(cs, &Comparison::partition_equal)},
                  {"hash_identical_rate", rate(cs, &Comparison::hash_equal)},
                  {"median_max_abs_ddecision", median_of(ddec)},
                  {"worst_max_abs_ddecision", max_of(ddec)},
                  {"decay_zero_median_max_abs_ddecision", median_of(dz)}};
  }
  return t;
}

/// Paper vs ours; the json is E1.json's `summary`.
TableJson headline(const Result& res, const std::vector<Comparison>& all) {
  auto of_streams = [&](auto pred) {
    std::vector<Comparison> cs;
    for (const auto& c : all)
      if (pred(c.stream)) cs.push_back(c);
    return cs;
  };
  const auto gi = of_streams([](const std::string& s) {
    return s.rfind("gaussian", 0) == 0 || s.rfind("icu", 0) == 0;
  });
  const auto learned = of_streams([](const std::string& s) { return s == "learned"; });
  const auto neardup = of_streams([](const std::string& s) { return s == "near_duplicate"; });
  const auto dz_all = collect(all, &Comparison::decay_ddecision, true);
  const auto dm_all = collect(all, &Comparison::mult_ddecision, true);
  const auto& names = res.selected_streams;
  const bool learned_selected = std::find(names.begin(), names.end(), "learned") != names.end();
  TableJson t{Table({"metric", "paper", "ours"}), nlohmann::json::array()};
  auto add = [&](const std::string& metric, const std::string& paper, const std::string& ours) {
    t.table.add_row({metric, paper, ours});
    t.json.push_back({{"metric", metric}, {"paper", paper}, {"ours", ours}});
  };
  add("partition match (all streams)", "98–100 %",
      all.empty() ? "n/a" : fmt_pct(rate(all, &Comparison::partition_equal)));
  add("bit-identical state hash (all streams)", "not reported",
      all.empty() ? "n/a" : fmt_pct(rate(all, &Comparison::hash_equal)));
  add("median max|Δf|, Gaussian + ICU keys", "~1e-9", median_cell(collect(gi, &Comparison::ddecision)));
  add("median max|Δf|, learned keys", "~1e-13",
      !learned_selected      ? "not run (stream not selected)"
      : learned_pending(res) ? "pending (needs LibTorch or --learned-keys)"
                             : median_cell(collect(learned, &Comparison::ddecision)));
  add("worst max|Δf|, near-duplicate stream", "1.1e-2", max_cell(collect(neardup, &Comparison::ddecision)));
  add("worst max|Δf|, all streams", "1.1e-2 (near-duplicates)",
      max_cell(collect(all, &Comparison::ddecision)));
  add("coefficient decay (zeroing), max|Δf| median [worst]", "1e-2 … 1e-1",
      dz_all.empty() ? "n/a" : fmt_sci(median_of(dz_all)) + " [" + fmt_sci(max_of(dz_all)) + "]");
  add("multiplicative decay (α_D × 0.1), max|Δf| median [worst]", "—",
      dm_all.empty() ? "n/a" : fmt_sci(median_of(dm_all)) + " [" + fmt_sci(max_of(dm_all)) + "]");
  return t;
}

std::vector<PlotResult> deviation_plots(const std::vector<Comparison>& all, const ExperimentOptions& o) {
  std::vector<PlotResult> plots;
  BarPlot bp;
  bp.title = "E1: max |Δ decision function| vs retraining from scratch, " +
             std::to_string(all.size()) + " deletions, all streams";
  bp.xlabel = "max over probes of |Δf|; bin 1eK = [1eK, 1eK+1), first bin = exactly 0";
  bp.ylabel = "deletions";
  bp.categories = hist_labels();
  bp.groups = {"decremental (svattn)", "coefficient decay (zeroing)", "multiplicative decay"};
  bp.values = {histogram(collect(all, &Comparison::ddecision)),
               histogram(collect(all, &Comparison::decay_ddecision, true)),
               histogram(collect(all, &Comparison::mult_ddecision, true))};
  bp.note = "exact zeros are counted in the first bin (a log axis cannot show 0); decay counts exclude reserve-only deletions";
  plots.push_back(detail::maybe_bar_plot(o, "E1_decision_deviation_hist", bp));
  bp.title = "E1: max |Δ readout| vs retraining from scratch";
  bp.xlabel = "max over probes and components of |Δo|; bin 1eK = [1eK, 1eK+1), first bin = exactly 0";
  bp.values = {histogram(collect(all, &Comparison::dreadout)),
               histogram(collect(all, &Comparison::decay_dreadout, true)),
               histogram(collect(all, &Comparison::mult_dreadout, true))};
  plots.push_back(detail::maybe_bar_plot(o, "E1_readout_deviation_hist", bp));
  return plots;
}

nlohmann::json settings_json(const Result& res) {
  return {{"n", res.settings.n}, {"trials_per_stream", res.trials}, {"kernel", "rbf"},
          {"bandwidth_rule", "median pairwise distance of the trial's keys (400 random pairs)"},
          {"C_rule", "C = 1 / (0.1 n)"}, {"ridge", ProblemSettings{}.ridge}, {"mode", "audit"},
          {"value_dim", kValueDim}, {"probes", kProbesOnKeys + kProbesAround},
          {"decay_factor", kDecayFactor}, {"scenarios", kScenarios}};
}

/// One line of data and scale for the report writer (`svattn reproduce`).
std::string scale_line(const Result& res, std::size_t deletions) {
  std::string list;
  int run = 0;
  for (const auto& s : res.streams) {
    list += (list.empty() ? "" : ", ") + s.name + (s.status == "ok" ? "" : " (" + s.status + ")");
    run += s.status == "ok" ? 1 : 0;
  }
  return std::to_string(run) + " streams × " + std::to_string(res.trials) + " trials, n = " +
         std::to_string(res.settings.n) + " tokens per trial, " + std::to_string(deletions) +
         " deletions; streams: " + list;
}

/// E1.json: the tables and summaries derived from the result, and the result under `result`.
nlohmann::json report_json(const Result& res, const std::vector<Comparison>& all, const TableJson& streams,
                           const TableJson& kinds, const TableJson& head,
                           const std::vector<PlotResult>& plots) {
  nlohmann::json comps = nlohmann::json::array();
  for (const auto& c : all) comps.push_back(c.to_json());
  nlohmann::json data = nlohmann::json::object();
  if (!res.data_dir.empty()) data = {{"data_dir", res.data_dir}, {"data_dir_source", res.data_dir_source}};
  nlohmann::json j = {
      {"experiment", "E1"},
      {"title", kInfo.title},
      {"preset", res.preset},
      {"seed", res.seed},
      {"created", res.created},
      {"machine", res.machine},
      {"data", data},
      {"settings", settings_json(res)},
      {"streams", streams.json},
      {"by_deletion", kinds.json},
      {"summary", head.json},
      {"tables", {{"per_stream", streams.table.json()}, {"by_deletion", kinds.table.json()},
                  {"headline", head.table.json()}}},
      {"comparisons", comps},
      {"runtime_seconds", res.measure_seconds},
      {"plots", detail::plots_json(plots)},
      {"scale", scale_line(res, all.size())},
  };
  j["result"] = res.to_json();  // render(Result::from_json(E1.json["result"])) writes this report
  return j;
}

std::string what_was_run_md() {
  std::ostringstream md;
  md << "## What was run\n\n"
     << "Each trial streams n keys one at a time into an audit-mode `svattn::Memory` (RBF kernel, "
        "σ = median pairwise distance of the trial's keys, C = 1/(0.1 n), ridge μ = "
     << fmt_sci(ProblemSettings{}.ridge, 0)
     << ", so the optimum is unique), then, each from a copy of the ingested memory, removes: one "
        "random margin token, one error token, one reserve token, a random set of max(2, n/20) "
        "tokens, and one record (ICU: all hours of one stay; other streams: 10 consecutive tokens). "
        "Each result is compared with `svattn::solve_batch` (SMO + canonical refinement) on the "
        "remaining tokens: partition equality, SHA-256 of the canonical state, max |Δα|, and, on "
     << kProbesOnKeys + kProbesAround << " probes (" << kProbesOnKeys << " stream keys + "
     << kProbesAround
     << " Gaussian points around the data), the max |Δ| of the decision function f and of the "
        "readout o (values ~ N(0, I_4)). Both states are evaluated by the same functions, so equal "
        "states give exactly 0.\n\n"
     << "Coefficient-decay baseline (no re-solve): the removed tokens' α are zeroed (or, "
        "multiplicative variant, multiplied by 0.1) and all α renormalised to sum 1; b is refitted "
        "as the mean of K_ii/2 − ((K+μI)α')_i over the surviving margin tokens (generous to the "
        "baseline). Its deviations are reported for deletions that remove coefficient mass "
        "(deleting reserve tokens leaves the state unchanged, so decay is exact there too).\n\n";
  return md.str();
}

/// The count of deletions not bit-identical to retraining, and each one's reproduction folder.
std::string not_identical_md(const std::vector<Comparison>& all) {
  std::vector<const Comparison*> bad;
  for (const auto& c : all)
    if (!c.hash_equal) bad.push_back(&c);
  std::ostringstream md;
  md << "\n**Deletions whose state is not bit-identical to retraining: " << bad.size() << " of "
     << all.size() << ".**";
  if (bad.empty()) return md.str() + "\n";
  md << " Each has a reproduction (tokens, removed ids, settings, `svattn replay` ops and command):\n\n";
  for (const Comparison* c : bad) {
    md << "- `" << c->repro << "`: " << c->removed << " tokens removed, partition "
       << (c->partition_equal ? "equal" : "differs") << ", max|Δα| " << fmt_sci(c->dalpha)
       << ", max|Δf| " << fmt_sci(c->ddecision) << ", max|Δo| " << fmt_sci(c->dreadout) << "\n";
  }
  return md.str();
}

std::string honest_md(const Result& res) {
  std::ostringstream md;
  md << "## Scale and data, honestly\n\n"
     << "- The paper's ICU keys come from MIMIC-IV; here they are hourly vitals of the open "
        "MIMIC-III demo (132 stays)" << (res.preset == "paper" ? " and PhysioNet/CinC 2012 (8,000 stays)" : "")
     << ", standardised (docs/experiments.md, \"ICU data\").\n"
     << "- The paper's learned keys come from its trained LM; "
     << (learned_pending(res) ? "that row is pending: this run had no trained keys (tiny preset, or no LibTorch).\n"
                              : "here they are read from `" + res.learned_keys + "`.\n")
     << "- Trial sizes (n = " << res.settings.n << ") are ours; the paper does not state its n.\n"
     << "- Deviation 0 means bit-identical decision values, not a rounding artefact: see the hash "
        "column.\n";
  return md.str();
}

std::string markdown(const Result& res, const std::vector<Comparison>& all, const Table& streams,
                     const Table& kinds, const Table& head, const std::vector<PlotResult>& plots) {
  std::ostringstream md;
  md << "# E1 — " << kInfo.title << "\n\n";
  md << "Preset `" << res.preset << "`, seed " << res.seed << ", " << res.trials
     << " trials per stream, n = " << res.settings.n
     << " tokens per trial (ICU: whole stays up to n hours). Run time "
     << fmt_fixed(res.measure_seconds, 1) << " s on " << res.machine.at("cpu").get<std::string>()
     << " (1 thread).\n\n";
  md << "## Paper vs ours\n\n" << head.markdown() << "\n";
  md << what_was_run_md();
  md << "## Per stream\n\n" << streams.markdown() << "\n";
  for (const auto& s : res.streams) md << "- `" << s.name << "`: " << s.description << "\n";
  md << not_identical_md(all);
  md << "\n## By deletion kind (all streams)\n\n" << kinds.markdown() << "\n";
  md << "## Plots\n\n"
     << detail::plots_markdown(plots, {"Decision-function deviation histogram",
                                       "Readout deviation histogram"})
     << "\n";
  md << honest_md(res);
  return md.str();
}

// ------------------------------------------------------------------------- the result's JSON

template <typename T>
T field(const nlohmann::json& j, const char* key, const char* what = "E1 result") {
  return detail::json_field<T>(j, key, what);
}

/// A double; null reads as NaN (nlohmann writes a non-finite double as null).
double number(const nlohmann::json& j, const char* key, const char* what = "E1 result") {
  return detail::number_or_nan(j, key, what);
}

/// A max |Δ| of a Comparison: null reads as +infinity. deviations() counts a NaN difference as
/// infinite (e.g. the readouts of a memory emptied by a record deletion), so a deviation is never
/// NaN, and JSON writes infinity as null.
double deviation(const nlohmann::json& j, const char* key, const char* what) {
  const nlohmann::json v = field<nlohmann::json>(j, key, what);
  return v.is_null() ? std::numeric_limits<double>::infinity() : number(j, key, what);
}

nlohmann::json stream_result_json(const StreamResult& s) {
  const nlohmann::json cs =
      detail::json_array(s.comparisons, [](const Comparison& c) { return c.to_json(); });
  return {{"name", s.name},   {"description", s.description}, {"status", s.status},
          {"pending_reason", s.pending_reason}, {"n", s.n}, {"d", s.d}, {"trials", s.trials},
          {"sigma_median", s.sigma_median}, {"C", s.C}, {"comparisons", cs}, {"seconds", s.seconds}};
}

StreamResult stream_result_from_json(const nlohmann::json& j) {
  StreamResult s;
  s.name = field<std::string>(j, "name");
  s.description = field<std::string>(j, "description");
  s.status = field<std::string>(j, "status");
  if (s.status != "ok" && s.status != "pending")
    throw FormatError("E1 result: field `status` of stream '" + s.name + "' is neither ok nor pending");
  s.pending_reason = field<std::string>(j, "pending_reason");
  s.n = field<int>(j, "n");
  s.d = field<int>(j, "d");
  s.trials = field<int>(j, "trials");
  s.sigma_median = number(j, "sigma_median");
  s.C = number(j, "C");
  s.comparisons = detail::json_array_field(j, "comparisons", "E1 result", Comparison::from_json);
  s.seconds = number(j, "seconds");
  return s;
}

}  // namespace

nlohmann::json Comparison::to_json() const {
  return {{"stream", stream},
          {"trial", trial},
          {"scenario", scenario},
          {"removed", removed},
          {"partition_equal", partition_equal},
          {"hash_equal", hash_equal},
          {"max_abs_dalpha", dalpha},
          {"max_abs_ddecision", ddecision},
          {"max_abs_dreadout", dreadout},
          {"decay_zero", {{"max_abs_dalpha", decay_dalpha},
                          {"max_abs_ddecision", decay_ddecision},
                          {"max_abs_dreadout", decay_dreadout}}},
          {"decay_mult", {{"max_abs_dalpha", mult_dalpha},
                          {"max_abs_ddecision", mult_ddecision},
                          {"max_abs_dreadout", mult_dreadout}}},
          {"removed_alpha_mass", removed_mass},
          {"events", events},
          {"repairs", repairs},
          {"batch_fallbacks", fallbacks},
          {"status", status},
          {"remove_seconds", remove_seconds},
          {"retrain_seconds", retrain_seconds},
          {"repro", repro}};
}

Comparison Comparison::from_json(const nlohmann::json& j) {
  const char* what = "E1 comparison";
  Comparison c;
  c.stream = field<std::string>(j, "stream", what);
  c.trial = field<int>(j, "trial", what);
  c.scenario = field<std::string>(j, "scenario", what);
  c.removed = field<int>(j, "removed", what);
  c.partition_equal = field<bool>(j, "partition_equal", what);
  c.hash_equal = field<bool>(j, "hash_equal", what);
  c.dalpha = deviation(j, "max_abs_dalpha", what);
  c.ddecision = deviation(j, "max_abs_ddecision", what);
  c.dreadout = deviation(j, "max_abs_dreadout", what);
  const nlohmann::json zero = field<nlohmann::json>(j, "decay_zero", what);
  c.decay_dalpha = deviation(zero, "max_abs_dalpha", "E1 comparison decay_zero");
  c.decay_ddecision = deviation(zero, "max_abs_ddecision", "E1 comparison decay_zero");
  c.decay_dreadout = deviation(zero, "max_abs_dreadout", "E1 comparison decay_zero");
  const nlohmann::json mult = field<nlohmann::json>(j, "decay_mult", what);
  c.mult_dalpha = deviation(mult, "max_abs_dalpha", "E1 comparison decay_mult");
  c.mult_ddecision = deviation(mult, "max_abs_ddecision", "E1 comparison decay_mult");
  c.mult_dreadout = deviation(mult, "max_abs_dreadout", "E1 comparison decay_mult");
  c.removed_mass = number(j, "removed_alpha_mass", what);
  c.events = field<long>(j, "events", what);
  c.repairs = field<long>(j, "repairs", what);
  c.fallbacks = field<long>(j, "batch_fallbacks", what);
  c.status = field<std::string>(j, "status", what);
  c.remove_seconds = number(j, "remove_seconds", what);
  c.retrain_seconds = number(j, "retrain_seconds", what);
  c.repro = field<std::string>(j, "repro", what);
  return c;
}

nlohmann::json Result::to_json() const {
  const nlohmann::json ss = detail::json_array(streams, stream_result_json);
  return {{"preset", preset},
          {"seed", seed},
          {"settings", settings},
          {"trials", trials},
          {"selected_streams", selected_streams},
          {"learned_keys", learned_keys},
          {"data_dir", data_dir},
          {"data_dir_source", data_dir_source},
          {"streams", ss},
          {"machine", machine},
          {"created", created},
          {"measure_seconds", measure_seconds}};
}

Result Result::from_json(const nlohmann::json& j) {
  Result r;
  r.preset = field<std::string>(j, "preset");
  r.seed = field<std::uint64_t>(j, "seed");
  r.settings = field<Settings>(j, "settings");
  r.trials = field<int>(j, "trials");
  r.selected_streams = field<std::vector<std::string>>(j, "selected_streams");
  r.learned_keys = field<std::string>(j, "learned_keys");
  r.data_dir = field<std::string>(j, "data_dir");
  r.data_dir_source = field<std::string>(j, "data_dir_source");
  r.streams = detail::json_array_field(j, "streams", "E1 result", stream_result_from_json);
  bool same = r.streams.size() == r.selected_streams.size();
  for (std::size_t i = 0; same && i < r.streams.size(); ++i)
    same = r.streams[i].name == r.selected_streams[i];
  if (!same)
    throw FormatError("E1 result: field `streams` has not one entry per selected stream, in order");
  r.machine = field<nlohmann::json>(j, "machine");
  if (!r.machine.is_object() || !r.machine.contains("cpu") || !r.machine["cpu"].is_string())
    throw FormatError("E1 result: field `machine` lacks the string `cpu`");
  r.created = field<std::string>(j, "created");
  r.measure_seconds = number(j, "measure_seconds");
  return r;
}

nlohmann::json preset(const std::string& name) { return preset_for(name); }

RangeTable ranges() {
  RangeTable t;
  t.keys = {{"n", 8, 20000},
            {"trials", 1, 10000},
            {"streams", 0, 0, false, 1, all_streams().size(), stream_names()},
            {"keys_model"},
            {"keys_steps", 0, 1000000},
            {"keys_tokens", 0, 1000000}};
  t.relations = [](const std::string& id, const nlohmann::json& s) {
    const auto& st = s["streams"];
    for (std::size_t i = 0; i < st.size(); ++i)
      for (std::size_t k = 0; k < i; ++k)
        if (st[i] == st[k]) bad(id + ".streams", "a list of distinct streams", st);
    if (s["keys_model"].get<std::string>().empty())
      bad(id + ".keys_model", "an LM preset name", s["keys_model"]);
  };
  return t;
}

std::vector<std::string> stream_names() {
  std::vector<std::string> v;
  for (const auto& s : all_streams()) v.push_back(s.name);
  return v;
}

Result measure(const ExperimentOptions& options) {
  options.validate();
  const Stopwatch total;
  Result res;
  res.preset = options.preset;
  res.seed = options.seed;
  res.settings = detail::with_overrides(preset_for(options.preset), "E1", options);
  res.selected_streams = options.streams.empty() ? res.settings.streams : options.streams;
  ExperimentOptions o = options;
  std::string keys_error;
  o.learned_keys = learned_keys_for(options, res, keys_error);
  res.learned_keys = o.learned_keys;
  res.trials = o.trials > 0 ? o.trials : res.settings.trials;
  for (const auto& nm : res.selected_streams) stream_def(nm);  // validate names first
  ensure_dir(o.out_dir);  // reproductions go below it: fail before the trials, not after
  const std::optional<DataDir> data_dir = icu_data_dir(res.selected_streams, o);
  if (data_dir) {
    res.data_dir = data_dir->path;
    res.data_dir_source = data_dir->source;
  }
  res.machine = detail::machine_info();
  res.created = utc_now();
  for (const auto& nm : res.selected_streams) {
    res.streams.push_back(run_stream(stream_def(nm), o, res.settings.n, data_dir ? &*data_dir : nullptr,
                                     res.trials, keys_error));
  }
  res.measure_seconds = total.seconds();
  return res;
}

ExperimentResult render(const Result& res, const ExperimentOptions& o) {
  ensure_dir(o.out_dir);
  const std::vector<Comparison> all = all_comparisons(res);
  const TableJson streams = per_stream(res);
  const TableJson kinds = per_kind(all);
  const TableJson head = headline(res, all);
  const std::vector<PlotResult> plots = deviation_plots(all, o);
  nlohmann::json j = report_json(res, all, streams, kinds, head, plots);
  detail::write_outputs(o, "E1", j, markdown(res, all, streams.table, kinds.table, head.table, plots));
  return ExperimentResult::from_json(j);
}

ExperimentResult run(const ExperimentOptions& o) { return render(measure(o), o); }

}  // namespace svattn::experiments::e1_forgetting
