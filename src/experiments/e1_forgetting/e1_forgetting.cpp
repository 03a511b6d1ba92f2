// E1 — exact forgetting: every trial streams keys into an audit-mode svattn::Memory, removes tokens
// decrementally (a margin, an error and a reserve token, a random set, one record) and compares the
// result with retraining from scratch (svattn::solve_batch on the remaining tokens), and with the
// coefficient-decay baseline (no re-solve).
#include <algorithm>
#include <cmath>
#include <filesystem>
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

struct Preset {
  int n = 0;
  int trials = 0;
  std::vector<std::string> streams;
  // The learned-keys stream (quick, paper): a hybrid LM trained for keys_steps on the enwik8
  // prefix, keys of keys_tokens consecutive validation bytes (registry.h, LearnedKeysSpec).
  std::string keys_model = "tiny";
  std::int64_t keys_steps = 0;
  std::int64_t keys_tokens = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Preset, n, trials, streams, keys_model, keys_steps, keys_tokens)

Preset preset_for(const std::string& name) {
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

/// Result of one deletion scenario.
struct Comparison {
  std::string stream;
  int trial = 0;
  std::string scenario;
  int removed = 0;
  bool partition_equal = false;
  bool hash_equal = false;
  double dalpha = 0;      // max |alpha_dec - alpha_retrained| over remaining tokens
  double ddecision = 0;   // max over probes |f_dec - f_retrained|
  double dreadout = 0;    // max over probes and components |o_dec - o_retrained|
  double decay_dalpha = 0, decay_ddecision = 0, decay_dreadout = 0;
  double mult_dalpha = 0, mult_ddecision = 0, mult_dreadout = 0;
  double removed_mass = 0;  // sum of alpha of the removed tokens before removal
  long events = 0, repairs = 0, fallbacks = 0;
  std::string status;
  double remove_seconds = 0, retrain_seconds = 0;
  std::string repro;  // folder with a reproduction when the hashes differ

  nlohmann::json json() const {
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
                   {"comparison", c.json()}});
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

struct StreamSummary {
  std::string name;
  std::string description;
  std::string status = "ok";  // ok | pending
  std::string pending_reason;
  int n = 0, d = 0, trials = 0;
  double sigma_median = 0, C = 0;
  std::vector<Comparison> comps;
  double seconds = 0;
};

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

StreamSummary run_stream(const StreamDef& def, const ExperimentOptions& o, const Preset& pre,
                         const DataDir* data_dir, int trials, const std::string& keys_error) {
  StreamSummary sum;
  sum.name = def.name;
  sum.description = def.description;
  StreamData data;
  if (def.kind == "learned") {
    if (o.learned_keys.empty()) {
      sum.status = "pending";
      sum.pending_reason = !keys_error.empty() ? "pending: training the keys' model failed: " + keys_error :
          o.preset == "tiny"
              ? "pending: the tiny preset trains no model (keys_steps = 0); pass --learned-keys FILE"
              : "pending: needs keys of a trained model: a LibTorch build trains (or reuses) a small "
                "hybrid for them, or pass --learned-keys FILE (`svattn dump-keys`)";
      return sum;
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
  sum.trials = trials;
  const Stopwatch watch;
  Progress progress("E1 " + def.name, trials, "trials", o.progress);
  std::vector<double> sigmas;
  for (int t = 0; t < trials; ++t) {
    Rng rng(derive_seed(o.seed, detail::name_hash(def.name) * 1000003ULL + static_cast<std::uint64_t>(t)));
    const TrialStream ts = make_trial(def, data, pre.n, rng);
    const int n = static_cast<int>(ts.keys.rows());
    sum.n = n;
    sum.d = static_cast<int>(ts.keys.cols());
    MemorySettings ms;
    ms.problem.kernel.type = KernelType::kRbf;
    ms.problem.kernel.bandwidth = median_pairwise_distance(ts.keys, 400, rng);
    ms.problem.C = 1.0 / (kNu * n);
    ms.mode = MemoryMode::kAudit;
    ms.validate();
    sigmas.push_back(ms.problem.kernel.bandwidth);
    sum.C = ms.problem.C;
    TokenSet all;
    all.keys = ts.keys;
    all.values = ts.values;
    for (int i = 0; i < n; ++i) all.ids.push_back(i);
    Memory mem(ms, sum.d, kValueDim);
    for (int i = 0; i < n; ++i) mem.add(i, ts.keys.row(i).transpose(), ts.values.row(i).transpose());
    const State before = mem.state();
    // Probes: keys of the stream and Gaussian points around it (per-dimension mean and spread).
    RowMatrix probes(kProbesOnKeys + kProbesAround, sum.d);
    {
      const std::vector<int> rows = sample_without_replacement(n, std::min(kProbesOnKeys, n), rng);
      const Eigen::RowVectorXd mean = ts.keys.colwise().mean();
      const Eigen::RowVectorXd sd =
          ((ts.keys.rowwise() - mean).array().square().colwise().sum() / std::max(1, n - 1)).sqrt();
      for (int p = 0; p < kProbesOnKeys; ++p) {
        probes.row(p) = ts.keys.row(rows[static_cast<std::size_t>(p) % rows.size()]);
      }
      for (int p = 0; p < kProbesAround; ++p)
        for (int j = 0; j < sum.d; ++j)
          probes(kProbesOnKeys + p, j) = mean(j) + sd(j) * rng.normal();
    }
    BatchSettings bs;
    bs.problem = ms.problem;
    bs.tolerances = ms.tolerances;
    const KernelSettings& ks = ms.problem.kernel;
    for (const auto& scenario : kScenarios) {
      const std::vector<TokenId> removed = pick(scenario, before, ts, rng);
      if (removed.empty()) continue;  // e.g. no error token in this trial
      Comparison c;
      c.stream = def.name;
      c.trial = t;
      c.scenario = scenario;
      c.removed = static_cast<int>(removed.size());
      Memory m2 = mem;
      const Stopwatch rw;
      const OpDiagnostics dg = removed.size() == 1 ? m2.remove(removed[0]) : m2.remove_batch(removed);
      c.remove_seconds = rw.seconds();
      c.events = dg.events;
      c.repairs = dg.repairs;
      c.fallbacks = dg.batch_fallbacks;
      c.status = to_string(m2.status());
      const State after = m2.state();
      const TokenSet remaining = all.without(removed);
      const Stopwatch bw;
      const BatchResult re = solve_batch(remaining, bs);
      c.retrain_seconds = bw.seconds();
      c.partition_equal = after.partition == re.state.partition;
      c.hash_equal = after.state_sha256 == re.state.state_sha256;
      if (after.ids != re.state.ids) throw std::runtime_error("E1: decremental and retrained ids differ");
      for (std::size_t i = 0; i < after.alpha.size(); ++i)
        c.dalpha = std::max(c.dalpha, std::abs(after.alpha[i] - re.state.alpha[i]));
      // Both states are evaluated by the same functions, so equal states give equal values.
      const TokenSet rem_sorted = sorted_by_id(remaining);
      const FunctionValues f_re = evaluate(ks, support_of(re.state, rem_sorted), re.state.b, probes);
      const FunctionValues f_dec = evaluate(ks, support_of(after, m2.tokens()), after.b, probes);
      deviations(f_dec, f_re, c.ddecision, c.dreadout);
      if (!c.hash_equal) {
        c.repro = write_repro(o, c, all, removed, ms.problem, after, re.state);
      }
      // Coefficient decay from the state before the removal.
      std::vector<char> is_removed(static_cast<std::size_t>(n), 0);
      for (TokenId id : removed) is_removed[static_cast<std::size_t>(id)] = 1;
      for (TokenId id : removed) c.removed_mass += before.alpha[static_cast<std::size_t>(id)];
      for (int variant = 0; variant < 2; ++variant) {
        const double factor = variant == 0 ? 0.0 : kDecayFactor;
        const auto [a, b] = decay_state(before, all, is_removed, factor);
        double da = 0;
        std::size_t k = 0;
        for (int i = 0; i < n; ++i) {
          if (is_removed[static_cast<std::size_t>(i)]) continue;
          da = std::max(da, std::abs(a[static_cast<std::size_t>(i)] - re.state.alpha[k]));
          ++k;
        }
        const FunctionValues f_dc = evaluate(ks, support_from(all, a), b, probes);
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
      sum.comps.push_back(c);
    }
    progress.tick();
  }
  progress.finish();
  sum.sigma_median = median_of(sigmas);
  sum.seconds = watch.seconds();
  return sum;
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

}  // namespace

nlohmann::json preset(const std::string& name) { return preset_for(name); }

std::vector<std::string> stream_names() {
  std::vector<std::string> v;
  for (const auto& s : all_streams()) v.push_back(s.name);
  return v;
}

ExperimentResult run(const ExperimentOptions& options) {
  options.validate();
  const Stopwatch total;
  const Preset pre = detail::with_overrides(preset_for(options.preset), "E1", options);
  const std::vector<std::string> names = options.streams.empty() ? pre.streams : options.streams;
  // The learned-keys row: keys given, else (quick, paper) trained or reused by the LibTorch
  // build's source (registry.h), else pending with the reason.
  ExperimentOptions o = options;
  std::string keys_error;
  const bool wants_learned = std::find(names.begin(), names.end(), "learned") != names.end();
  if (wants_learned && o.learned_keys.empty() && pre.keys_steps > 0 && learned_keys_source()) {
    LearnedKeysSpec spec;
    spec.model = pre.keys_model;
    spec.steps = pre.keys_steps;
    spec.tokens = std::max<std::int64_t>(pre.keys_tokens, pre.n);
    try {
      o.learned_keys = learned_keys_source()(o, spec);
    } catch (const Error& e) {  // e.g. no enwik8: the other streams still run
      keys_error = e.what();
    }
  }
  const int trials = o.trials > 0 ? o.trials : pre.trials;
  for (const auto& nm : names) stream_def(nm);  // validate names first
  ensure_dir(o.out_dir);
  std::optional<DataDir> data_dir;
  for (const auto& nm : names) {
    const std::string kind = stream_def(nm).kind;
    if (kind == "icu_mimic" || kind == "icu_physionet2012") {
      data_dir = resolve_data_dir(o.data_dir);
      break;
    }
  }
  std::vector<StreamSummary> sums;
  for (const auto& nm : names) {
    sums.push_back(run_stream(stream_def(nm), o, pre, data_dir ? &*data_dir : nullptr, trials, keys_error));
  }

  // ---------------------------------------------------------------- tables
  Table per_stream({"stream", "n", "d", "σ (median)", "C", "trials", "deletions",
                    "partition match", "hash identical", "median max|Δf|", "worst max|Δf|",
                    "worst max|Δo|", "worst max|Δα|", "decay: median max|Δf|",
                    "decay: worst max|Δf|", "mult-decay: median max|Δf|", "repairs / fallbacks",
                    "retrain / remove time"});
  nlohmann::json streams_json = nlohmann::json::array();
  std::vector<Comparison> all_comps;
  for (const auto& s : sums) {
    nlohmann::json sj = {{"name", s.name}, {"description", s.description}, {"status", s.status}};
    if (s.status != "ok") {
      sj["reason"] = s.pending_reason;
      per_stream.add_row({s.name, "–", "–", "–", "–", "–", "–", s.pending_reason, "–", "–", "–",
                          "–", "–", "–", "–", "–", "–", "–"});
      streams_json.push_back(sj);
      continue;
    }
    const auto& cs = s.comps;
    all_comps.insert(all_comps.end(), cs.begin(), cs.end());
    const double pm = rate(cs, &Comparison::partition_equal);
    const double he = rate(cs, &Comparison::hash_equal);
    const auto ddec = collect(cs, &Comparison::ddecision);
    const auto dro = collect(cs, &Comparison::dreadout);
    const auto dal = collect(cs, &Comparison::dalpha);
    const auto dz = collect(cs, &Comparison::decay_ddecision, true);
    const auto dzo = collect(cs, &Comparison::decay_dreadout, true);
    const auto dm = collect(cs, &Comparison::mult_ddecision, true);
    const double t_rem = median_of(collect(cs, &Comparison::remove_seconds));
    const double t_re = median_of(collect(cs, &Comparison::retrain_seconds));
    long fallbacks = 0, repairs = 0;
    for (const auto& c : cs) {
      fallbacks += c.fallbacks;
      repairs += c.repairs;
    }
    per_stream.add_row({s.name, std::to_string(s.n), std::to_string(s.d), fmt_fixed(s.sigma_median, 3),
                        fmt_sci(s.C), std::to_string(s.trials), std::to_string(cs.size()), fmt_pct(pm),
                        fmt_pct(he), median_cell(ddec), max_cell(ddec), max_cell(dro), max_cell(dal),
                        median_cell(dz), max_cell(dz), median_cell(dm),
                        std::to_string(repairs) + " / " + std::to_string(fallbacks),
                        fmt_fixed(t_rem > 0 ? t_re / t_rem : std::nan(""), 1) + "×"});
    sj.update({{"n", s.n}, {"d", s.d}, {"sigma_median", s.sigma_median}, {"C", s.C},
               {"trials", s.trials}, {"deletions", cs.size()}, {"partition_match_rate", pm},
               {"hash_identical_rate", he},
               {"median_max_abs_ddecision", median_of(ddec)}, {"worst_max_abs_ddecision", max_of(ddec)},
               {"median_max_abs_dreadout", median_of(dro)}, {"worst_max_abs_dreadout", max_of(dro)},
               {"worst_max_abs_dalpha", max_of(dal)},
               {"decay_zero", {{"median_max_abs_ddecision", median_of(dz)},
                               {"worst_max_abs_ddecision", max_of(dz)},
                               {"median_max_abs_dreadout", median_of(dzo)},
                               {"deletions_with_removed_mass", dz.size()}}},
               {"decay_mult", {{"median_max_abs_ddecision", median_of(dm)},
                               {"worst_max_abs_ddecision", max_of(dm)}}},
               {"median_remove_seconds", t_rem}, {"median_retrain_seconds", t_re},
               {"repairs", repairs}, {"batch_fallbacks", fallbacks}, {"seconds", s.seconds}});
    streams_json.push_back(sj);
  }

  Table per_kind({"deletion", "deletions", "mean tokens removed", "partition match", "hash identical",
                  "median max|Δf|", "worst max|Δf|", "decay: median max|Δf|", "decay: worst max|Δf|"});
  nlohmann::json kinds_json = nlohmann::json::object();
  for (const auto& sc : kScenarios) {
    std::vector<Comparison> cs;
    for (const auto& c : all_comps)
      if (c.scenario == sc) cs.push_back(c);
    if (cs.empty()) continue;
    double mean_removed = 0;
    for (const auto& c : cs) mean_removed += c.removed;
    mean_removed /= static_cast<double>(cs.size());
    const auto ddec = collect(cs, &Comparison::ddecision);
    const auto dz = collect(cs, &Comparison::decay_ddecision);
    per_kind.add_row({sc, std::to_string(cs.size()), fmt_fixed(mean_removed, 1),
                      fmt_pct(rate(cs, &Comparison::partition_equal)),
                      fmt_pct(rate(cs, &Comparison::hash_equal)), median_cell(ddec), max_cell(ddec),
                      median_cell(dz), max_cell(dz)});
    kinds_json[sc] = {{"deletions", cs.size()},
                      {"partition_match_rate", rate(cs, &Comparison::partition_equal)},
                      {"hash_identical_rate", rate(cs, &Comparison::hash_equal)},
                      {"median_max_abs_ddecision", median_of(ddec)},
                      {"worst_max_abs_ddecision", max_of(ddec)},
                      {"decay_zero_median_max_abs_ddecision", median_of(dz)}};
  }

  // ---------------------------------------------------------------- headline vs paper
  auto pick_streams = [&](auto pred) {
    std::vector<Comparison> cs;
    for (const auto& c : all_comps)
      if (pred(c.stream)) cs.push_back(c);
    return cs;
  };
  const auto gi = pick_streams([](const std::string& s) {
    return s.rfind("gaussian", 0) == 0 || s.rfind("icu", 0) == 0;
  });
  const auto learned = pick_streams([](const std::string& s) { return s == "learned"; });
  const auto neardup = pick_streams([](const std::string& s) { return s == "near_duplicate"; });
  const auto dz_all = collect(all_comps, &Comparison::decay_ddecision, true);
  const auto dm_all = collect(all_comps, &Comparison::mult_ddecision, true);
  const bool learned_pending = std::any_of(sums.begin(), sums.end(), [](const StreamSummary& s) {
    return s.name == "learned" && s.status != "ok";
  });
  Table headline({"metric", "paper", "ours"});
  nlohmann::json summary = nlohmann::json::array();
  auto add_head = [&](const std::string& metric, const std::string& paper, const std::string& ours) {
    headline.add_row({metric, paper, ours});
    summary.push_back({{"metric", metric}, {"paper", paper}, {"ours", ours}});
  };
  add_head("partition match (all streams)", "98–100 %",
           all_comps.empty() ? "n/a" : fmt_pct(rate(all_comps, &Comparison::partition_equal)));
  add_head("bit-identical state hash (all streams)", "not reported",
           all_comps.empty() ? "n/a" : fmt_pct(rate(all_comps, &Comparison::hash_equal)));
  add_head("median max|Δf|, Gaussian + ICU keys", "~1e-9", median_cell(collect(gi, &Comparison::ddecision)));
  const bool learned_selected = std::find(names.begin(), names.end(), "learned") != names.end();
  add_head("median max|Δf|, learned keys", "~1e-13",
           !learned_selected ? "not run (stream not selected)"
           : learned_pending ? "pending (needs LibTorch or --learned-keys)"
                             : median_cell(collect(learned, &Comparison::ddecision)));
  add_head("worst max|Δf|, near-duplicate stream", "1.1e-2", max_cell(collect(neardup, &Comparison::ddecision)));
  add_head("worst max|Δf|, all streams", "1.1e-2 (near-duplicates)",
           max_cell(collect(all_comps, &Comparison::ddecision)));
  add_head("coefficient decay (zeroing), max|Δf| median [worst]", "1e-2 … 1e-1",
           dz_all.empty() ? "n/a" : fmt_sci(median_of(dz_all)) + " [" + fmt_sci(max_of(dz_all)) + "]");
  add_head("multiplicative decay (α_D × 0.1), max|Δf| median [worst]", "—",
           dm_all.empty() ? "n/a" : fmt_sci(median_of(dm_all)) + " [" + fmt_sci(max_of(dm_all)) + "]");

  // ---------------------------------------------------------------- plots
  std::vector<PlotResult> plots;
  {
    BarPlot bp;
    bp.title = "E1: max |Δ decision function| vs retraining from scratch, " +
               std::to_string(all_comps.size()) + " deletions, all streams";
    bp.xlabel = "max over probes of |Δf|; bin 1eK = [1eK, 1eK+1), first bin = exactly 0";
    bp.ylabel = "deletions";
    bp.categories = hist_labels();
    bp.groups = {"decremental (svattn)", "coefficient decay (zeroing)", "multiplicative decay"};
    bp.values = {histogram(collect(all_comps, &Comparison::ddecision)),
                 histogram(collect(all_comps, &Comparison::decay_ddecision, true)),
                 histogram(collect(all_comps, &Comparison::mult_ddecision, true))};
    bp.note = "exact zeros are counted in the first bin (a log axis cannot show 0); decay counts exclude reserve-only deletions";
    plots.push_back(detail::maybe_bar_plot(o, "E1_decision_deviation_hist", bp));
    bp.title = "E1: max |Δ readout| vs retraining from scratch";
    bp.xlabel = "max over probes and components of |Δo|; bin 1eK = [1eK, 1eK+1), first bin = exactly 0";
    bp.values = {histogram(collect(all_comps, &Comparison::dreadout)),
                 histogram(collect(all_comps, &Comparison::decay_dreadout, true)),
                 histogram(collect(all_comps, &Comparison::mult_dreadout, true))};
    plots.push_back(detail::maybe_bar_plot(o, "E1_readout_deviation_hist", bp));
  }

  // ---------------------------------------------------------------- markdown + json
  nlohmann::json comps_json = nlohmann::json::array();
  for (const auto& c : all_comps) comps_json.push_back(c.json());
  nlohmann::json data_json = nlohmann::json::object();
  if (data_dir) data_json = {{"data_dir", data_dir->path}, {"data_dir_source", data_dir->source}};
  const double runtime = total.seconds();
  nlohmann::json j = {
      {"experiment", "E1"},
      {"title", find_experiment("E1").title},
      {"preset", o.preset},
      {"seed", o.seed},
      {"created", utc_now()},
      {"machine", detail::machine_info()},
      {"data", data_json},
      {"settings",
       {{"n", pre.n}, {"trials_per_stream", trials}, {"kernel", "rbf"},
        {"bandwidth_rule", "median pairwise distance of the trial's keys (400 random pairs)"},
        {"C_rule", "C = 1 / (0.1 n)"}, {"ridge", ProblemSettings{}.ridge}, {"mode", "audit"},
        {"value_dim", kValueDim}, {"probes", kProbesOnKeys + kProbesAround},
        {"decay_factor", kDecayFactor}, {"scenarios", kScenarios}}},
      {"streams", streams_json},
      {"by_deletion", kinds_json},
      {"summary", summary},
      {"tables", {{"per_stream", per_stream.json()}, {"by_deletion", per_kind.json()},
                  {"headline", headline.json()}}},
      {"comparisons", comps_json},
      {"runtime_seconds", runtime},
  };
  nlohmann::json plots_json = nlohmann::json::array();
  for (const auto& p : plots) plots_json.push_back(p.json());
  j["plots"] = plots_json;
  {
    // One line of data and scale for the report writer (`svattn reproduce`).
    std::string list;
    int run = 0;
    for (const auto& sm : sums) {
      list += (list.empty() ? "" : ", ") + sm.name + (sm.status == "ok" ? "" : " (" + sm.status + ")");
      run += sm.status == "ok" ? 1 : 0;
    }
    j["scale"] = std::to_string(run) + " streams × " + std::to_string(trials) + " trials, n = " +
                 std::to_string(pre.n) + " tokens per trial, " + std::to_string(all_comps.size()) +
                 " deletions; streams: " + list;
  }

  std::ostringstream md;
  md << "# E1 — " << find_experiment("E1").title << "\n\n";
  md << "Preset `" << o.preset << "`, seed " << o.seed << ", " << trials << " trials per stream, n = "
     << pre.n << " tokens per trial (ICU: whole stays up to n hours). Run time " << fmt_fixed(runtime, 1)
     << " s on " << j["machine"]["cpu"].get<std::string>() << " (1 thread).\n\n";
  md << "## Paper vs ours\n\n" << headline.markdown() << "\n";
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
  md << "## Per stream\n\n" << per_stream.markdown() << "\n";
  for (const auto& s : sums) md << "- `" << s.name << "`: " << s.description << "\n";
  {
    std::vector<const Comparison*> bad;
    for (const auto& c : all_comps)
      if (!c.hash_equal) bad.push_back(&c);
    md << "\n**Deletions whose state is not bit-identical to retraining: " << bad.size() << " of "
       << all_comps.size() << ".**";
    if (!bad.empty()) {
      md << " Each has a reproduction (tokens, removed ids, settings, `svattn replay` ops and command):\n\n";
      for (const Comparison* c : bad) {
        md << "- `" << c->repro << "`: " << c->removed << " tokens removed, partition "
           << (c->partition_equal ? "equal" : "differs") << ", max|Δα| " << fmt_sci(c->dalpha)
           << ", max|Δf| " << fmt_sci(c->ddecision) << ", max|Δo| " << fmt_sci(c->dreadout) << "\n";
      }
    } else {
      md << "\n";
    }
  }
  md << "\n## By deletion kind (all streams)\n\n" << per_kind.markdown() << "\n";
  md << "## Plots\n\n"
     << detail::plots_markdown(plots, {"Decision-function deviation histogram",
                                       "Readout deviation histogram"})
     << "\n";
  md << "## Scale and data, honestly\n\n"
     << "- The paper's ICU keys come from MIMIC-IV; here they are hourly vitals of the open "
        "MIMIC-III demo (132 stays)" << (o.preset == "paper" ? " and PhysioNet/CinC 2012 (8,000 stays)" : "")
     << ", standardised (docs/experiments.md, \"ICU data\").\n"
     << "- The paper's learned keys come from its trained LM; "
     << (learned_pending ? "that row is pending: this run had no trained keys (tiny preset, or no LibTorch).\n"
                         : "here they are read from `" + o.learned_keys + "`.\n")
     << "- Trial sizes (n = " << pre.n << ") are ours; the paper does not state its n.\n"
     << "- Deviation 0 means bit-identical decision values, not a rounding artefact: see the hash "
        "column.\n";
  const std::string markdown = md.str();
  detail::write_outputs(o, "E1", j, markdown);
  return ExperimentResult::from_json(j);
}

}  // namespace svattn::experiments::e1_forgetting
