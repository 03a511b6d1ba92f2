// E3 / E5 / E6 drivers at their tiny presets: the copy task's labels, state matching, the paired
// t-test, seed reproducibility, and the CLI route `svattn experiment E3`.
#include <gtest/gtest.h>
#include "experiments/result_keys.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "svattn/errors.h"
#include "experiments/e3_selective_copy/e3_selective_copy.h"
#include "experiments/e5_char_lm/e5_char_lm.h"
#include "experiments/e6_throughput/e6_throughput.h"
#include "experiments/registry.h"
#include "experiments/framework/statistics.h"
#include "experiments/torch_experiments.h"
#include "svattn/torch/model.h"
#include "svattn/torch/support_stats.h"
#include "experiments/e5_char_lm/internal.h"

namespace fs = std::filesystem;
using namespace svattn::experiments;
using namespace svattn::experiments::e3_selective_copy;
using svattn::support::Rng;
using nlohmann::json;

namespace {

std::string data_dir() { return std::string(SVATTN_SOURCE_DIR) + "/../shared/data"; }

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("svattn-lmx-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ExperimentOptions tiny_options(const fs::path& out) {
  ExperimentOptions o;
  o.preset = "tiny";
  o.seed = 7;
  o.out_dir = out.string();
  o.data_dir = data_dir();
  o.progress = false;
  o.plots = false;
  return o;
}

/// Runs an experiment of the LibTorch half through the registry; its E?.json as JSON.
json run_id(const std::string& id, const ExperimentOptions& o) {
  install_torch_experiments();
  const ExperimentResult r = run_experiment(id, o);
  const json j = r.to_json();
  EXPECT_EQ(ExperimentResult::from_json(j).to_json(), j) << id << ": the result round-trips";
  return j;
}

}  // namespace

// ------------------------------------------------------------------ selective-copy generator

TEST(SelectiveCopy, PrefixOfDataOnlyCopiesItInOrder) {
  // prefix == k: every prefix position is a data symbol, so the targets are the prefix itself.
  SelectiveCopyTask t{5, 3, 3};
  Rng rng(1);
  const auto b = make_selective_copy_batch(t, 4, rng);
  ASSERT_EQ(b.length, 6);  // 3 data, go, 2 queries
  for (int r = 0; r < 4; ++r) {
    const std::int64_t* in = b.inputs.data() + r * 6;
    const std::int64_t* tg = b.targets.data() + r * 6;
    for (int i = 0; i < 3; ++i) {
      EXPECT_GE(in[i], SelectiveCopyTask::kFirstSymbol);
      EXPECT_LT(in[i], SelectiveCopyTask::kFirstSymbol + 5);
      EXPECT_EQ(tg[i], -100);
      EXPECT_EQ(tg[3 + i], in[i]) << "output " << i << " of row " << r;
    }
    EXPECT_EQ(in[3], SelectiveCopyTask::kGo);
    EXPECT_EQ(in[4], SelectiveCopyTask::kQuery);
    EXPECT_EQ(in[5], SelectiveCopyTask::kQuery);
    EXPECT_EQ((std::vector<int>{0, 1, 2}), b.data_positions[static_cast<std::size_t>(r)]);
  }
}

TEST(SelectiveCopy, LabelsAreTheDataSymbolsInPositionOrder) {
  SelectiveCopyTask t{8, 4, 40};
  Rng rng(99);
  const auto b = make_selective_copy_batch(t, 64, rng);
  ASSERT_EQ(b.length, 44);
  std::set<std::int64_t> seen;
  for (int r = 0; r < 64; ++r) {
    const std::int64_t* in = b.inputs.data() + r * 44;
    const std::int64_t* tg = b.targets.data() + r * 44;
    std::vector<std::int64_t> data;
    std::vector<int> pos;
    for (int i = 0; i < 40; ++i) {
      if (in[i] != SelectiveCopyTask::kPad) data.push_back(in[i]), pos.push_back(i);
      EXPECT_EQ(tg[i], -100);
    }
    ASSERT_EQ(data.size(), 4u) << "row " << r;
    EXPECT_EQ(pos, b.data_positions[static_cast<std::size_t>(r)]);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(tg[40 + i], data[static_cast<std::size_t>(i)]);
      seen.insert(data[static_cast<std::size_t>(i)]);
    }
    EXPECT_EQ(in[40], SelectiveCopyTask::kGo);
    for (int i = 41; i < 44; ++i) EXPECT_EQ(in[i], SelectiveCopyTask::kQuery);
  }
  EXPECT_EQ(seen.size(), 8u);  // 256 draws cover the alphabet
  // The same seed gives the same batch; another seed does not.
  Rng a(99), c(100);
  EXPECT_EQ(make_selective_copy_batch(t, 64, a).inputs, b.inputs);
  EXPECT_NE(make_selective_copy_batch(t, 64, c).inputs, b.inputs);
}

TEST(SelectiveCopy, RejectsBadTasks) {
  Rng rng(1);
  EXPECT_THROW(make_selective_copy_batch({8, 5, 4}, 1, rng), svattn::InvalidArgument);
  EXPECT_THROW(make_selective_copy_batch({1, 2, 4}, 1, rng), svattn::InvalidArgument);
  EXPECT_THROW(make_selective_copy_batch({8, 2, 4}, 0, rng), svattn::InvalidArgument);
}

// ------------------------------------------------------------------ state matching

TEST(StateMatching, MatchedWindowCarriesTheHybridsState) {
  svattn::layers::AttentionConfig h;
  h.type = svattn::layers::AttentionType::kHybrid;
  h.d_model = 64;
  h.n_heads = 2;
  h.hybrid.chunk = 16;
  for (double support : {8.0, 11.4, 13.6, 52.0}) {
    svattn::layers::AttentionConfig w = h;
    w.type = svattn::layers::AttentionType::kSlidingWindow;
    w.window = svattn::layers::state_matched_window(h.hybrid.chunk, support);
    const double sv = state_floats_per_head(h, support, 1 << 20);
    const double sw = state_floats_per_head(w, support, 1 << 20);
    // window = chunk + round(support): equal up to the rounding of the support and the alpha
    // floats.
    EXPECT_LE(std::fabs(sv - sw), 0.5 * 64 + support + 1e-9) << support;
    EXPECT_EQ(sw, static_cast<double>(16 + std::lround(support)) * 64);
  }
  {  // The sliding local path holds W_loc + chunk - 1 tokens; memory off holds no support.
    svattn::layers::AttentionConfig hw = h;
    hw.hybrid.local = svattn::layers::LocalPath::kWindow;
    hw.hybrid.local_window = 10;
    EXPECT_EQ(state_floats_per_head(hw, 8.0, 1 << 20), (10 + 16 - 1 + 8.0) * 64 + 8.0);
    hw.hybrid.memory = false;
    EXPECT_EQ(state_floats_per_head(hw, 8.0, 1 << 20), (10 + 16 - 1) * 64.0);
  }
  svattn::layers::AttentionConfig lin = h;
  lin.type = svattn::layers::AttentionType::kLinear;
  lin.n_heads = 1;
  EXPECT_EQ(state_floats_per_head(lin, 0, 100), 64.0 * 64 + 64);
  lin.type = svattn::layers::AttentionType::kDeltaNet;
  EXPECT_EQ(state_floats_per_head(lin, 0, 100), 64.0 * 64);
}

// ------------------------------------------------------------------ E3 tiny

TEST(E3Tiny, StateMatchedAndSeedReproducible) {
  TempDir a("e3a"), b("e3b");
  const json ja = run_id("E3", tiny_options(a.path));
  const json jb = run_id("E3", tiny_options(b.path));
  ASSERT_TRUE(fs::exists(a.path / "E3.md"));
  ASSERT_TRUE(fs::exists(a.path / "E3.json"));
  ASSERT_EQ(ja["summary"].size(), 5u);
  const auto& m = ja["methods"];
  for (const char* name : {"hybrid", "swa", "linear", "deltanet"}) {
    ASSERT_TRUE(m.contains(name)) << name;
    const auto& ea = m[name]["eval"];
    const auto& eb = jb["methods"][name]["eval"];
    ASSERT_EQ(ea.size(), 3u);
    for (std::size_t i = 0; i < ea.size(); ++i) {
      EXPECT_EQ(ea[i]["recall"].get<double>(), eb[i]["recall"].get<double>()) << name;
      const double r = ea[i]["recall"].get<double>();
      EXPECT_GE(r, 0.0);
      EXPECT_LE(r, 1.0);
    }
    EXPECT_EQ(m[name]["final_train_loss"].get<double>(),
              jb["methods"][name]["final_train_loss"].get<double>());
    EXPECT_EQ(m[name]["loss_curve"], jb["methods"][name]["loss_curve"]);
  }
  // The support at the training length sets the window: W = chunk (8) + round(support).
  const double support = ja["hybrid_average_support"].get<double>();
  EXPECT_EQ(support, jb["hybrid_average_support"].get<double>());
  EXPECT_GE(support, 4.0 - 1e-9);  // C = 1/4: at least 1/C tokens carry the readout
  EXPECT_EQ(ja["matched_window"].get<long>(), 8 + std::lround(support));
  EXPECT_EQ(m["swa"]["window"].get<long>(), ja["matched_window"].get<long>());
  // Same number of heads (2, d_k + d_v = 16): the window's state equals the hybrid's up to the
  // rounding of the support and the alpha floats.
  const double sv = m["hybrid"]["state_floats_per_layer"].get<double>();
  const double sw = m["swa"]["state_floats_per_layer"].get<double>();
  EXPECT_EQ(sw, 2.0 * 16 * ja["matched_window"].get<double>());
  EXPECT_LE(std::fabs(sv - sw), 2 * (0.5 * 16 + support) + 1e-9);
  // The recurrent baselines: the head split (H | 16, even d_k) whose fixed state H·d_k·d_v (+ H·d_k
  // for linear attention) is closest in ratio to the hybrid's state at the training length.
  const double target = ja["hybrid_state_floats_per_layer_at_training_length"].get<double>();
  EXPECT_DOUBLE_EQ(target, sv);
  auto closest = [&](bool linear) {
    double best = 0, gap = 1e300;
    for (int h : {1, 2, 4, 8}) {
      const double dk = 16.0 / h, st = h * (dk * dk + (linear ? dk : 0.0));
      if (std::fabs(std::log(st / target)) < gap - 1e-12)
        gap = std::fabs(std::log(st / target)), best = st;
    }
    return best;
  };
  const double lin = m["linear"]["state_floats_per_layer"].get<double>();
  const double dn = m["deltanet"]["state_floats_per_layer"].get<double>();
  EXPECT_EQ(lin, closest(true));
  EXPECT_EQ(dn, closest(false));
  EXPECT_EQ(ja["recurrent_state_covers_hybrid"].get<bool>(), std::min(lin, dn) >= sv);
  // Recall is the mean of the per-output accuracies; the support and gate are reported per layer.
  for (const char* name : {"hybrid", "swa", "linear", "deltanet"}) {
    for (const auto& e : m[name]["eval"]) {
      const auto& per = e["recall_per_output"];
      ASSERT_EQ(per.size(), 2u);  // k = 2
      EXPECT_NEAR(e["recall"].get<double>(), (per[0].get<double>() + per[1].get<double>()) / 2,
                  1e-12);
      EXPECT_EQ(e["outputs"].get<long>(), 2L * 8);  // k outputs x 8 sequences
    }
  }
  for (const auto& e : m["hybrid"]["eval"]) {
    // The hybrid's state at each padding from the support measured there: 2 heads of
    // (chunk 8 + support)·(d_k + d_v = 16) + support.
    const double s = e["support_mean"].get<double>();
    EXPECT_DOUBLE_EQ(e["hybrid_state_floats_per_layer"].get<double>(), 2 * ((8 + s) * 16 + s));
    EXPECT_EQ(e["support_per_layer_head"].size(), 1u);
    EXPECT_EQ(e["support_per_layer_head"][0].size(), 2u);
    EXPECT_EQ(e["gate_memory_share_per_layer"].size(), 1u);
  }
  EXPECT_EQ(m["hybrid"]["sigma_per_layer_head"].size(), 1u);
  // Same model everywhere except the attention: softmax-type and linear attention have the same
  // projections; the hybrid adds its gate and bandwidth parameters, DeltaNet its beta projection.
  EXPECT_EQ(m["swa"]["parameters"].get<long>(), m["linear"]["parameters"].get<long>());
  EXPECT_GT(m["hybrid"]["parameters"].get<long>(), m["swa"]["parameters"].get<long>());
  EXPECT_GT(m["deltanet"]["parameters"].get<long>(), m["swa"]["parameters"].get<long>());
}

std::vector<Override> overrides(const std::vector<std::string>& items) {
  std::vector<Override> v;
  for (const auto& i : items) v.push_back(parse_override(i));
  return v;
}

// The typed result of two seeds, with the other SV path evaluated, round-trips through E3.json;
// the report rendered from the file alone is the one the run wrote.
TEST(E3Tiny, ReportRendersFromTheResultInE3JsonAlone) {
  TempDir a("e3j"), b("e3jr");
  ExperimentOptions o = tiny_options(a.path);
  o.overrides = overrides({"seeds=1,2", "eval_exact=true"});
  run_id("E3", o);
  std::ifstream in(a.path / "E3.json");
  const json file = json::parse(in);
  const e3_selective_copy::Result r = e3_selective_copy::Result::from_json(file["result"]);
  ASSERT_EQ(r.runs.size(), 2u);
  EXPECT_EQ(r.overrides, "seeds=1,2 eval_exact=true");
  const MethodResult* hyb = r.runs[0].find("hybrid");
  ASSERT_NE(hyb, nullptr);
  EXPECT_FALSE(hyb->eval_exact.empty());
  EXPECT_TRUE(std::isfinite(hyb->eval.front().partition_agreement));
  EXPECT_FALSE(std::isfinite(r.runs[0].find("swa")->eval.front().gate_mean));
  EXPECT_EQ(e3_selective_copy::Result::from_json(r.to_json()).to_json(), r.to_json());
  svattn::test::expect_every_key_checked(
      file["result"], [](const json& j) { e3_selective_copy::Result::from_json(j); }, {"settings"},
      {"machine"}, {"outputs"});
  ExperimentOptions elsewhere = tiny_options(b.path);
  elsewhere.overrides = overrides({"steps=1"});  // render uses the result's settings, not these
  e3_selective_copy::render(r, elsewhere);
  const std::string md = read_text(a.path / "E3.md");
  EXPECT_NE(md.find("## Over 2 seeds"), std::string::npos);
  EXPECT_NE(md.find("evaluated by the exact path"), std::string::npos);
  EXPECT_EQ(read_text(b.path / "E3.md"), md);
  json missing = file["result"];
  missing["runs"][1]["methods"][0]["eval"][0].erase("recall");
  EXPECT_THROW(e3_selective_copy::Result::from_json(missing), svattn::FormatError);
  json unknown = file["result"];
  unknown["runs"][0]["methods"][0]["method"] = "mamba";
  EXPECT_THROW(e3_selective_copy::Result::from_json(unknown), svattn::FormatError);
}

TEST(E3Tiny, SetOverridesApplyAndBadOnesAreRejected) {
  TempDir a("e3o");
  ExperimentOptions o = tiny_options(a.path);
  o.overrides = overrides({"methods=hybrid,softmax", "steps=3", "factors=1,2", "C=0.3", "chunk=4",
                           "long_factor=2", "E3.long_eval_sequences=3"});
  const json j = run_id("E3", o);
  EXPECT_EQ(j["overrides"].get<std::string>(),
            "methods=hybrid,softmax steps=3 factors=1,2 C=0.3 chunk=4 long_factor=2 E3.long_eval_sequences=3");
  // Factors >= long_factor are evaluated on long_eval_sequences sequences, for every method.
  for (const char* name : {"hybrid", "softmax"}) {
    EXPECT_EQ(j["methods"][name]["eval"][0]["outputs"].get<long>(), 2L * 8) << name;
    EXPECT_EQ(j["methods"][name]["eval"][1]["outputs"].get<long>(), 2L * 3) << name;
  }
  EXPECT_EQ(j["settings"]["C"].get<double>(), 0.3);
  EXPECT_EQ(j["settings"]["chunk"].get<long>(), 4);
  EXPECT_EQ(j["methods"].size(), 2u);
  EXPECT_EQ(j["methods"]["softmax"]["eval"].size(), 2u);
  EXPECT_EQ(j["matched_window"].get<long>(),
            4 + std::lround(j["hybrid_average_support"].get<double>()));
  o.overrides = overrides({"steps=3", "no_such_key=1"});
  EXPECT_THROW(run_id("E3", o), SettingError);
  o.overrides = overrides({"steps=three"});
  EXPECT_THROW(run_id("E3", o), SettingError);
  o.overrides = overrides({"methods=swa"});  // the window needs the hybrid first (or window=W)
  EXPECT_THROW(run_id("E3", o), svattn::InvalidArgument);
  // Ranges, checked before anything trains: workers=100000 aborted, workers=0 ran with exit 0.
  for (const char* item : {"workers=0", "workers=100000", "iters=1000000000", "heads=3",
                           "prefix=1", "factors=[]", "mask_tol=0.5", "gate=both"}) {
    o.overrides = overrides({item});
    try {
      run_id("E3", o);
      ADD_FAILURE() << item << " accepted";
    } catch (const SettingError& e) {
      const std::string key = std::string(item).substr(0, std::string(item).find('='));
      EXPECT_NE(std::string(e.what()).find("E3." + key), std::string::npos) << e.what();
    }
  }
}

// ------------------------------------------------------------------ E5 / E6 tiny

// The LibTorch experiments' presets meet their own ranges, and out-of-range values of E5 and E6
// are refused by key before anything trains.
TEST(Ranges, TorchExperimentsPresetsAndHostileValues) {
  install_torch_experiments();
  for (const char* id : {"E3", "E5", "E6"}) {
    const Experiment& e = find_experiment(id);
    ASSERT_TRUE(e.available()) << id;
    EXPECT_FALSE(e.ranges.keys.empty()) << id;
    std::vector<std::string> names = {"tiny", "quick", "paper"};
    names.insert(names.end(), e.extra_presets.begin(), e.extra_presets.end());
    for (const auto& name : names)
      EXPECT_NO_THROW(check_ranges(e.presets(name), e.id, e.ranges)) << id << " " << name;
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"E5", "seeds=0"},  {"E5", "workers=0"},   {"E5", "workers=100000"}, {"E5", "batch=100000000"},
      {"E5", "device=tpu"}, {"E5", "pairs=[{\"hybrid\":\"nope\",\"swa\":\"swa-3m\",\"reference\":\"\",\"gate\":\"chunk\"}]"},
      {"E5", "corpus=wiki"}, {"E6", "presets=[]"}, {"E6", "presets=nope"}, {"E6", "seq=1"},
      {"E6", "steps=0"}};
  for (const auto& [id, item] : cases) {
    ExperimentOptions o;
    o.preset = "tiny";
    o.overrides = overrides({item});
    try {
      check_overrides(o, {id});
      ADD_FAILURE() << id << " " << item << " accepted";
    } catch (const SettingError& e) {
      const std::string key = id + "." + item.substr(0, item.find('='));
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

// `--set E5.steps=N` keeps the preset's proportions (docs/experiments.md "Ranges of the `--set`
// keys"): warm-up and validation interval scale unless given too, the runs get their own
// directories and the note says so; the cpu preset runs 260 steps, warm-up 20, validation every 26.
TEST(E5Settings, StepsOverrideScalesWarmupAndValidationAndNamesTheRuns) {
  namespace e5 = e5_char_lm;
  const e5::Settings preset = e5::e5_preset("cpu");
  ASSERT_EQ(preset.steps, 260);
  const auto with = [&](const std::vector<std::string>& items, std::string& suffix) {
    ExperimentOptions o;
    o.preset = "cpu";
    for (const auto& item : items) o.overrides.push_back(parse_override(item));
    e5::Settings p = apply_overrides(json(preset), "E5", o.overrides).get<e5::Settings>();
    suffix = e5::scale_to_steps(p, preset.steps, o);
    return p;
  };
  std::string suffix;
  e5::Settings p = with({"E5.steps=2600"}, suffix);
  EXPECT_EQ(suffix, "-steps2600");
  EXPECT_EQ(p.steps, 2600);
  EXPECT_EQ(p.warmup, 200);
  EXPECT_EQ(p.eval_every, 260);
  EXPECT_EQ(p.note, preset.note + "; steps overridden to 2600 (--set E5.steps)");
  p = with({"steps=130", "E5.warmup=7"}, suffix);  // unscoped steps; warm-up given: kept
  EXPECT_EQ(suffix, "-steps130");
  EXPECT_EQ(p.warmup, 7);
  EXPECT_EQ(p.eval_every, 13);
  p = with({"E5.steps=2", "E5.eval_every=0"}, suffix);  // rounds to at least 1; eval_every given
  EXPECT_EQ(p.warmup, 1);
  EXPECT_EQ(p.eval_every, 0);
  p = with({"E5.seeds=2", "E3.steps=9"}, suffix);  // no E5 steps: the preset's, the usual runs
  EXPECT_EQ(suffix, "");
  EXPECT_EQ(p.steps, 260);
  EXPECT_EQ(p.warmup, 20);
  EXPECT_EQ(p.eval_every, 26);
  EXPECT_EQ(p.note, preset.note);
}

TEST(E5Tiny, MatchedWindowAndSeedReproducible) {
  if (!fs::exists(data_dir() + "/tinyshakespeare/input.txt"))
    GTEST_SKIP() << "tiny-shakespeare not found under " << data_dir();
  TempDir a("e5a"), b("e5b");
  const json ja = run_id("E5", tiny_options(a.path));
  const json jb = run_id("E5", tiny_options(b.path));
  ASSERT_TRUE(fs::exists(a.path / "E5.md"));
  // Every model of the fair geometry ran, each for both seeds.
  std::map<std::string, int> runs_of;
  for (const auto& pair : ja["pairs"])
    for (const auto& run : pair["runs"]) ++runs_of[run["preset"].get<std::string>()];
  const std::map<std::string, int> every_model = {
      {"hybrid-400k", 2}, {"swa-400k", 2}, {"softmax-400k", 2}, {"hybrid-local-400k", 2},
      {"hybrid-window-400k", 2}, {"swa-window-400k", 2}, {"hybrid-window-local-400k", 2}};
  EXPECT_EQ(runs_of, every_model);
  const auto& pa = ja["pairs"][0];
  const auto& pb = jb["pairs"][0];
  EXPECT_EQ(pa["hybrid_test_bpc"].size(), 2u);
  EXPECT_EQ(pa["hybrid_test_bpc"], pb["hybrid_test_bpc"]);
  EXPECT_EQ(pa["swa_test_bpc"], pb["swa_test_bpc"]);
  EXPECT_EQ(ja["pairs"][1]["ablation_test_bpc"], jb["pairs"][1]["ablation_test_bpc"]);
  for (const auto& pair : ja["pairs"]) {
    // The paired tests against the window and against the memory-off ablation are computed from
    // the numbers the pair reports.
    std::vector<double> h = pair["hybrid_test_bpc"], w = pair["swa_test_bpc"], ab = pair["ablation_test_bpc"];
    EXPECT_DOUBLE_EQ(pair["paired_t"]["mean_difference"].get<double>(), paired_t_test(w, h).mean_difference);
    EXPECT_DOUBLE_EQ(pair["paired_t_vs_ablation"]["mean_difference"].get<double>(),
                     paired_t_test(ab, h).mean_difference);
    for (const auto& run : pair["runs"]) {
      const std::string preset = run["preset"];
      EXPECT_GT(run["test_bpc"].get<double>(), 0.0) << preset;
      EXPECT_LT(run["test_bpc"].get<double>(), 8.5) << preset;
      // BPC by position within the chunk: 16 positions of equal weight (64 = 4 chunks), whose mean
      // is the test BPC.
      const std::vector<double> pos = run["position_bpc"];
      ASSERT_EQ(pos.size(), 16u) << preset;
      double mean = 0;
      for (double v : pos) mean += v / 16.0;
      EXPECT_NEAR(mean, run["test_bpc"].get<double>(), 1e-9) << preset;
      EXPECT_EQ(run.contains("layer_sigma"), preset == "hybrid-400k" || preset == "hybrid-window-400k") << preset;
      if (preset.rfind("swa", 0) != 0) continue;
      // State matching: the window is the matched hybrid's local width (chunk 16, or W_loc 4 +
      // chunk 16 - 1 with the sliding local path) plus its measured support.
      const double s = run["matched_support"].get<double>();
      EXPECT_GT(s, 0.0);
      EXPECT_EQ(run["chunk"].get<long>(), 16);
      const long local = preset == "swa-window-400k" ? 4 + 16 - 1 : 16;
      EXPECT_EQ(run["window"].get<long>(), local + std::lround(s)) << preset;
    }
  }
  // The typed result round-trips through E5.json, and the report rendered from the file alone
  // (no corpus, no training) is the one the run wrote.
  std::ifstream in(a.path / "E5.json");
  const json file = json::parse(in);
  const e5_char_lm::Result r = e5_char_lm::Result::from_json(file["result"]);
  ASSERT_EQ(r.pairs.size(), 2u);
  ASSERT_EQ(r.pairs[0].hybrid.size(), 2u);
  ASSERT_EQ(r.pairs[1].ablation.size(), 2u);
  EXPECT_FALSE(r.pairs[0].hybrid[0].position_bpc.empty());
  EXPECT_FALSE(std::isfinite(r.pairs[0].hybrid[0].matched_support));
  EXPECT_TRUE(std::isfinite(r.pairs[0].swa[0].matched_support));
  EXPECT_FALSE(r.pairs[0].hybrid[0].layer_gate.empty());
  EXPECT_EQ(e5_char_lm::Result::from_json(r.to_json()).to_json(), r.to_json());
  svattn::test::expect_every_key_checked(
      file["result"], [](const json& j) { e5_char_lm::Result::from_json(j); }, {"settings", "pair"},
      {"machine", "last_fifth_valid_improvement"},
      {"window", "steps", "matched_support", "gate_memory_share_curve", "support_curve",
       "layer_gate_memory_share", "layer_support", "layer_sigma", "position_bpc", "ablation",
       "last_fifth_valid_improvement"});
  TempDir c("e5r");
  ExperimentOptions elsewhere = tiny_options(c.path);
  elsewhere.data_dir = (c.path / "no-data").string();  // render reads no corpus
  e5_char_lm::render(r, elsewhere);
  const auto text = [](const fs::path& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_NE(text(a.path / "E5.md").find("## Test BPC"), std::string::npos);
  EXPECT_NE(text(a.path / "E5.md").find("## Test BPC by position within the chunk"), std::string::npos);
  EXPECT_EQ(text(c.path / "E5.md"), text(a.path / "E5.md"));
  json missing = file["result"];
  missing["pairs"][0]["swa"][0].erase("test_bpc");
  EXPECT_THROW(e5_char_lm::Result::from_json(missing), svattn::FormatError);
}

TEST(E6Tiny, ReportsEveryPresetAndTheRatio) {
  if (!fs::exists(data_dir() + "/tinyshakespeare/input.txt"))
    GTEST_SKIP() << "tiny-shakespeare not found under " << data_dir();
  TempDir a("e6");
  const json j = run_id("E6", tiny_options(a.path));
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["slowdown_vs_reference"].get<double>(), 1.0);
  for (const auto& r : j["rows"]) EXPECT_GT(r["tokens_per_second"].get<double>(), 0.0);
  EXPECT_TRUE(j["rows"][1].contains("support_mean"));
  // The typed result round-trips through E6.json, and the report rendered from the file alone
  // is the one the run wrote.
  std::ifstream in(a.path / "E6.json");
  const json file = json::parse(in);
  const e6_throughput::Result r = e6_throughput::Result::from_json(file);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_FALSE(r.rows[0].support_mean.has_value());
  EXPECT_TRUE(r.rows[1].support_mean.has_value());
  EXPECT_EQ(e6_throughput::Result::from_json(r.to_json()).to_json(), r.to_json());
  TempDir b("e6r");
  e6_throughput::render(r, tiny_options(b.path));
  const auto text = [](const fs::path& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_NE(text(a.path / "E6.md").find("## Throughput"), std::string::npos);
  EXPECT_EQ(text(b.path / "E6.md"), text(a.path / "E6.md"));
  json missing = file;
  missing.erase("rows");
  EXPECT_THROW(e6_throughput::Result::from_json(missing), svattn::FormatError);
}

#ifdef SVATTN_CLI
TEST(E3Tiny, SeedsSideBySideEqualSequentialRunsAndAggregate) {
  TempDir a("e3s"), b("e3s1"), c("e3s2");
  ExperimentOptions o = tiny_options(a.path);
  o.overrides = overrides({"seeds=1,2", "workers=2"});
  const json j = run_id("E3", o);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["seeds"], json({1, 2}));
  // Two workers give the runs one seed alone gives (the same initialisation, batches and bits).
  for (int s : {1, 2}) {
    ExperimentOptions one = tiny_options(s == 1 ? b.path : c.path);
    one.seed = static_cast<std::uint64_t>(s);
    const json js = run_id("E3", one);
    const json& r = j["runs"][s - 1];
    EXPECT_EQ(r["seed"].get<int>(), s);
    for (const char* name : {"hybrid", "swa", "linear", "deltanet"}) {
      EXPECT_EQ(r["methods"][name]["loss_curve"], js["methods"][name]["loss_curve"]) << name << s;
      for (std::size_t i = 0; i < js["methods"][name]["eval"].size(); ++i)
        EXPECT_EQ(r["methods"][name]["eval"][i]["recall"].get<double>(),
                  js["methods"][name]["eval"][i]["recall"].get<double>())
            << name << s;
    }
    EXPECT_EQ(r["matched_window"], js["matched_window"]);
  }
  // The top level is the first seed; the tables over the seeds are there, with mean ± sd.
  EXPECT_EQ(j["methods"], j["runs"][0]["methods"]);
  ASSERT_TRUE(j["tables"].contains("recall_over_seeds"));
  ASSERT_EQ(j["tables"]["recall_per_seed"]["rows"].size(), 8u);  // 4 methods x 2 seeds
  const std::string cell = j["tables"]["recall_over_seeds"]["rows"][0]["1x"].get<std::string>();
  EXPECT_NE(cell.find(" ± "), std::string::npos) << cell;
  EXPECT_NE(j["summary"][0]["ours"].get<std::string>().find(" ± "), std::string::npos);
  const std::string md = read_text(a.path / "E3.md");
  EXPECT_NE(md.find("## Over 2 seeds"), std::string::npos);
  EXPECT_NE(md.find("distinct keys"), std::string::npos);
  // Distinct support keys never exceed the support.
  for (const auto& r : j["runs"])
    for (const auto& e : r["methods"]["hybrid"]["eval"])
      EXPECT_LE(e["distinct_support_mean"].get<double>(), e["support_mean"].get<double>() + 1e-12);
  // Bad seed lists and worker counts are misuse, named.
  o.overrides = overrides({"seeds=1,1"});
  EXPECT_THROW(run_id("E3", o), svattn::InvalidArgument);
  o.overrides = overrides({"workers=0"});
  EXPECT_THROW(run_id("E3", o), svattn::InvalidArgument);
  o.overrides = overrides({"seeds=-3"});
  EXPECT_THROW(run_id("E3", o), svattn::InvalidArgument);
}

TEST(DistinctSupport, CountsBitwiseEqualSupportKeysOncePerMemory) {
  // One sequence, one head, T = 4 keys of d = 2: tokens 0, 1 and 3 share a key, token 2 differs.
  auto keys = torch::tensor({1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.0f}).view({1, 1, 4, 2});
  // Chunk 1: memory c holds tokens < c. Roles: 1 = margin, 2 = error, 0 = reserve.
  auto role = torch::zeros({1, 1, 4, 4}, torch::kInt8);
  auto alpha = torch::zeros({1, 1, 4, 4}, torch::kFloat64);
  role[0][0][1][0] = 1;  // memory 1: {0}
  alpha[0][0][1][0] = 1.0;
  role[0][0][2][0] = 1;  // memory 2: {0, 1}, duplicates with equal alpha
  role[0][0][2][1] = 1;
  alpha[0][0][2][0] = 0.5;
  alpha[0][0][2][1] = 0.5;
  role[0][0][3][0] = 2;  // memory 3: {0, 1, 2}, the duplicates differ by 0.25
  role[0][0][3][1] = 1;
  role[0][0][3][2] = 1;
  alpha[0][0][3][0] = 0.5;
  alpha[0][0][3][1] = 0.25;
  alpha[0][0][3][2] = 0.25;
  const auto d = svattn::layers::distinct_support(keys, role, alpha, 1);
  ASSERT_EQ(d.distinct_per_head.size(), 1u);
  EXPECT_DOUBLE_EQ(d.distinct_per_head[0], (1.0 + 1.0 + 2.0) / 3.0);
  EXPECT_EQ(d.duplicate_support_tokens, 2);
  EXPECT_DOUBLE_EQ(d.duplicate_alpha_spread, 0.25);
  // A key that differs in its last bit is distinct.
  auto near = keys.clone();
  near[0][0][1][0] = std::nextafter(1.0f, 2.0f);
  const auto n = svattn::layers::distinct_support(near, role, alpha, 1);
  EXPECT_DOUBLE_EQ(n.distinct_per_head[0], (1.0 + 2.0 + 3.0) / 3.0);
  EXPECT_EQ(n.duplicate_support_tokens, 0);
  EXPECT_THROW(svattn::layers::distinct_support(keys, role.narrow(3, 0, 3), alpha, 1),
               svattn::InvalidArgument);
}

TEST(Cli, ExperimentE3RunsThroughTheExperimentSubcommand) {
  TempDir a("cli");
  const std::string cmd = std::string(SVATTN_CLI) +
                          " experiment E3 --preset tiny --seed 3 --quiet --no-plots --out " +
                          a.path.string() + " > " + (a.path / "stdout.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_TRUE(fs::exists(a.path / "E3.json"));
  const std::string bad = std::string(SVATTN_CLI) + " experiment E9 > /dev/null 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
  // A bad --set exits 2 with one line naming the key (the old SVATTN_E3_SET channel is gone).
  const std::string set = std::string(SVATTN_CLI) + " experiment E3 --preset tiny --quiet --set iters=many --out " +
                          (a.path / "bad").string() + " 2> " + (a.path / "err.txt").string();
  EXPECT_EQ(WEXITSTATUS(std::system(set.c_str())), 2);
  std::ifstream in(a.path / "err.txt");
  std::string line;
  std::getline(in, line);
  EXPECT_NE(line.find("--set iters:"), std::string::npos) << line;
  EXPECT_FALSE(fs::exists(a.path / "bad"));
}
#endif
