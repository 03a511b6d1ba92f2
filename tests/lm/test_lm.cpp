// Tests of the character-LM stack: data, presets, trainer (loss falls, bit-identical resume after a
// simulated crash and after kill -9), deterministic evaluation, typed checkpoint errors, dump-keys.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/cli_test_util.h"
#include "support/clock.h"
#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/io.h"
#include "svattn/lm/trainer.h"

extern char** environ;

namespace svattn::lm {
namespace {

namespace fs = std::filesystem;
using svattn::test::TempDir;

std::string data_dir() { return std::string(SVATTN_SOURCE_DIR) + "/../shared/data"; }
bool have_shakespeare() { return fs::exists(data_dir() + "/tinyshakespeare/input.txt"); }

#define REQUIRE_DATA()                                                                      \
  if (!have_shakespeare()) GTEST_SKIP() << "tiny-shakespeare not found under " << data_dir()

TrainOptions tiny_options(const std::string& out, std::int64_t steps) {
  TrainOptions o;
  o.preset = "tiny";
  o.data.corpus = "shakespeare";
  o.data.data_dir = data_dir();
  o.out = out;
  o.steps = steps;
  o.set("seed", 7);
  // One thread: the tiny model is dispatch-bound, and on a shared 2-core machine a second
  // thread only adds contention. Results are deterministic for a fixed thread count.
  o.threads = 1;
  o.progress = false;
  o.plot = false;
  return o;
}

/// (step, loss) of the train records of a run's metrics.jsonl.
std::vector<std::pair<std::int64_t, double>> logged_losses(const std::string& run) {
  std::ifstream in(run + "/metrics.jsonl");
  std::vector<std::pair<std::int64_t, double>> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["type"] == "train") out.emplace_back(j["step"].get<std::int64_t>(), j["loss"].get<double>());
  }
  return out;
}

std::vector<std::uint8_t> pattern_bytes(std::size_t n) {
  std::vector<std::uint8_t> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>('a' + (i * 7 + i / 13) % 26);
  return b;
}

// ------------------------------------------------------------------ data

using Range = std::pair<std::int64_t, std::int64_t>;

TEST(LmCorpus, SplitsAndWindowsAreDeterministic) {
  Corpus c = Corpus::from_bytes("pattern", pattern_bytes(10000));
  EXPECT_EQ(c.range(Split::kTrain), Range(0, 9000));
  EXPECT_EQ(c.range(Split::kValid), Range(9000, 9500));
  EXPECT_EQ(c.range(Split::kTest), Range(9500, 10000));
  auto a = batch_offsets(c, Split::kTrain, 32, 64, 5, 17);
  EXPECT_EQ(a, batch_offsets(c, Split::kTrain, 32, 64, 5, 17));
  EXPECT_NE(a, batch_offsets(c, Split::kTrain, 32, 64, 5, 18));
  EXPECT_NE(a, batch_offsets(c, Split::kTrain, 32, 64, 6, 17));
  for (auto off : a) {
    EXPECT_GE(off, 0);
    EXPECT_LE(off + 65, 9000);
  }
  // Validation windows stay in the valid split and tile it with stride seq.
  auto v = eval_offsets(c, Split::kValid, 64, 0);
  ASSERT_EQ(v.size(), static_cast<std::size_t>((500 - 1) / 64));
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], 9000 + static_cast<std::int64_t>(i) * 64);
  EXPECT_LE(v.back() + 65, 9500);
  auto sub = eval_offsets(c, Split::kValid, 64, 3);
  EXPECT_EQ(sub, (std::vector<std::int64_t>{9000, 9000 + 2 * 64, 9000 + 4 * 64}));
  EXPECT_THROW(batch_offsets(c, Split::kValid, 1, 600, 1, 1), InvalidArgument);
  EXPECT_THROW(split_from_string("dev"), InvalidArgument);
}

TEST(LmCorpus, KnownSplitSizesOfShakespeare) {
  REQUIRE_DATA();
  DataSpec s;
  s.corpus = "shakespeare";
  s.data_dir = data_dir();
  Corpus c = Corpus::load(s);
  EXPECT_EQ(c.size(), 1115394u);
  EXPECT_EQ(c.sha256(), "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed");
  EXPECT_EQ(c.range(Split::kValid).first, 1115394 * 90 / 100);
}

TEST(LmCorpus, MissingDataNamesTheFileAndWhereToGetIt) {
  TempDir d("lm-data");
  DataSpec s;
  s.corpus = "enwik8";
  s.data_dir = d.path().string();
  try {
    Corpus::load(s);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("enwik8/enwik8.prefix-4154064"), std::string::npos) << m;
    EXPECT_NE(m.find("mattmahoney.net"), std::string::npos) << m;
  }
  s.corpus = "shakespeare";
  try {
    Corpus::load(s);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("tinyshakespeare/input.txt"), std::string::npos) << e.what();
  }
  s.data_dir = d.file("nope");
  try {
    Corpus::load(s);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(d.file("nope")), std::string::npos) << e.what();
  }
  DataSpec f;
  f.path = d.file("missing.txt");
  try {
    Corpus::load(f);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt"), std::string::npos) << e.what();
  }
  s.data_dir = d.path().string();
  s.corpus = "wiki103";
  EXPECT_THROW(Corpus::load(s), InvalidArgument);
  d.write("small.txt", "too small");
  f.path = d.file("small.txt");
  EXPECT_THROW(Corpus::load(f), FormatError);
}

// ------------------------------------------------------------------ presets

TEST(LmPresets, ParameterCountsAndStateMatchedWindow) {
  torch::manual_seed(0);
  layers::CharLm hybrid(make_preset("hybrid-3m").model);
  const auto n = layers::count_parameters(*hybrid);
  std::printf("hybrid-3m parameters: %lld\n", static_cast<long long>(n));
  EXPECT_GT(n, 3'150'000);
  EXPECT_LT(n, 3'300'000);
  layers::CharLm soft(make_preset("softmax-3m").model);
  // Only the hybrid's gate projection (d x H), gate bias and log sigma (H each) differ per layer.
  EXPECT_EQ(n - layers::count_parameters(*soft), 4 * (256 * 4 + 4 + 4));
  Preset swa = make_preset("swa-3m");
  EXPECT_EQ(swa.model.attention.window, 64 + std::llround(kDefaultMatchedSupport));
  EXPECT_EQ(make_preset("swa-3m", 20.4).model.attention.window, 84);
  // tiny-swa is state-matched the same way (chunk 32), not fixed.
  EXPECT_EQ(make_preset("tiny-swa").model.attention.window, 32 + std::llround(kDefaultTinyMatchedSupport));
  EXPECT_EQ(make_preset("tiny-swa", 10.4).model.attention.window, 42);
  Preset h10 = make_preset("hybrid-10m");
  layers::CharLm big(h10.model);
  const auto n10 = layers::count_parameters(*big);
  std::printf("hybrid-10m parameters: %lld\n", static_cast<long long>(n10));
  EXPECT_GT(n10, 9'500'000);
  EXPECT_LT(n10, 10'500'000);
  EXPECT_EQ(make_preset("hybrid-token-3m").model.attention.hybrid.gate, layers::GateType::kPerToken);
  // The sized hybrids train on the exact path; the test model on the batched one.
  for (const char* name : {"hybrid-800k", "hybrid-token-800k", "hybrid-3m", "hybrid-10m"})
    EXPECT_EQ(make_preset(name).model.attention.hybrid.path, layers::GlobalPath::kExact) << name;
  EXPECT_EQ(make_preset("tiny").model.attention.hybrid.path, layers::GlobalPath::kBatched);
  EXPECT_THROW(make_preset("hybrid-5m"), InvalidArgument);
  for (const auto& name : preset_names()) {
    Preset p = make_preset(name);
    EXPECT_NO_THROW(p.model.validate()) << name;
    EXPECT_NO_THROW(p.train.validate()) << name;
    const auto j = to_json(p.model);
    EXPECT_EQ(to_json(lm_config_from_json(j)), j) << name;
    EXPECT_EQ(to_json(train_hyper_from_json(to_json(p.train))), to_json(p.train)) << name;
  }
}

// Window-mode presets are matched by their local width (W_loc + chunk - 1); the local-only presets
// switch the memory off; old configs without the new fields load as the paper's layer.
TEST(LmPresets, WindowModePresetsAndStateAccounting) {
  const Preset hw = make_preset("hybrid-window-3m");
  EXPECT_EQ(hw.model.attention.type, layers::AttentionType::kHybrid);
  EXPECT_EQ(hw.model.attention.hybrid.local, layers::LocalPath::kWindow);
  EXPECT_EQ(hw.model.attention.hybrid.local_window, kWindowPresetLocal);
  EXPECT_TRUE(hw.model.attention.hybrid.memory);
  EXPECT_FALSE(make_preset("hybrid-window-local-3m").model.attention.hybrid.memory);
  EXPECT_FALSE(make_preset("hybrid-local-800k").model.attention.hybrid.memory);
  EXPECT_EQ(make_preset("hybrid-local-800k").model.attention.hybrid.local, layers::LocalPath::kChunk);
  EXPECT_EQ(make_preset("swa-window-3m").model.attention.window,
            kWindowPresetLocal + 64 - 1 + std::llround(kDefaultMatchedSupport));
  EXPECT_EQ(make_preset("swa-window-3m", 20.4).model.attention.window, kWindowPresetLocal + 63 + 20);
  // The paper's presets are unchanged by the new kinds.
  EXPECT_EQ(make_preset("swa-3m").model.attention.window, 64 + std::llround(kDefaultMatchedSupport));
  EXPECT_EQ(make_preset("hybrid-3m").model.attention.hybrid.local, layers::LocalPath::kChunk);
  auto j = to_json(make_preset("hybrid-3m").model);
  for (const char* key : {"local", "local_window", "memory"}) j["attention"]["hybrid"].erase(key);
  const auto old = lm_config_from_json(j);
  EXPECT_EQ(old.attention.hybrid.local, layers::LocalPath::kChunk);
  EXPECT_TRUE(old.attention.hybrid.memory);
  auto tj = to_json(make_preset("hybrid-3m").train);
  EXPECT_FALSE(train_hyper_from_json(tj).gate_weight_decay);
  tj.erase("gate_weight_decay");  // runs written before the switch decayed the gate
  EXPECT_TRUE(train_hyper_from_json(tj).gate_weight_decay);
}

// The gate's matrices are not decayed unless gate_weight_decay asks for it.
TEST(LmTrainer, GateParametersAreNotDecayedByDefault) {
  for (const char* kind : {"tiny", "hybrid-window-800k"}) {
    Preset p = make_preset(kind);
    p.model.attention.hybrid.gate = layers::GateType::kPosition;
    layers::CharLm model(p.model);
    auto holds = [](const torch::optim::OptimizerParamGroup& g, const torch::Tensor& t) {
      for (const auto& q : g.params())
        if (q.is_same(t)) return true;
      return false;
    };
    long gate_matrices = 0;
    for (bool decay_gate : {false, true}) {
      p.train.gate_weight_decay = decay_gate;
      auto groups = param_groups(*model, p.train);
      ASSERT_EQ(groups.size(), 2u);
      EXPECT_EQ(static_cast<const torch::optim::AdamWOptions&>(groups[1].options()).weight_decay(), 0.0);
      for (const auto& item : model->named_parameters()) {
        const bool gate = is_gate_parameter(item.key());
        const bool matrix = item.value().dim() >= 2;
        if (gate && matrix && !decay_gate) ++gate_matrices;
        EXPECT_EQ(holds(groups[0], item.value()), matrix && (decay_gate || !gate)) << kind << " " << item.key();
      }
    }
    EXPECT_EQ(gate_matrices, 2 * p.model.n_layers) << kind;  // gate_proj and gate_position
  }
  EXPECT_TRUE(is_gate_parameter("block0.attn.gate_proj.weight"));
  EXPECT_FALSE(is_gate_parameter("block0.attn.q_proj.weight"));
  EXPECT_FALSE(is_gate_parameter("block0.attn.aggregate_x"));
}

// ------------------------------------------------------------------ trainer

TEST(LmTrainer, TinyPresetLossFallsOnShakespeare) {
  REQUIRE_DATA();
  TempDir d("lm-train");
  TrainOptions o = tiny_options(d.file("run"), 100);
  o.set("eval_every", 0);
  o.set("checkpoint_every", 0);
  Trainer t(o);
  TrainResult r = t.run();
  ASSERT_EQ(r.steps.size(), 100u);
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i) first += r.steps[static_cast<std::size_t>(i)].loss / 10;
  for (int i = 90; i < 100; ++i) last += r.steps[static_cast<std::size_t>(i)].loss / 10;
  std::printf("tiny: mean loss steps 1-10 %.4f, steps 91-100 %.4f nats; valid BPC %.4f; %.0f tok/s\n", first,
              last, r.final_valid_bpc, r.tokens_per_second);
  EXPECT_NEAR(r.steps[0].loss, std::log(256.0), 0.3);  // starts near uniform over bytes
  EXPECT_LT(last, first - 1.0);
  // Uniform is 8 bits; the byte unigram entropy of tiny-shakespeare is 4.78 bits: below it the
  // model uses context (measured: 4.53 before the batched path's fp64 repair, 4.65 after, on 8
  // validation windows after 100 steps).
  EXPECT_LT(r.final_valid_bpc, 4.78);
  // The hybrid's diagnostics are in the JSONL: support >= 1/C = 16 tokens, gate split in (0, 1).
  std::ifstream in(d.file("run") + "/metrics.jsonl");
  std::string line, last_train;
  while (std::getline(in, line))
    if (line.find("\"type\":\"train\"") != std::string::npos) last_train = line;
  auto j = nlohmann::json::parse(last_train);
  ASSERT_EQ(j["layers"].size(), 2u);
  EXPECT_GE(j["support_mean"].get<double>(), 16.0 - 1e-9);
  EXPECT_GT(j["gate_memory_share"].get<double>(), 0.0);
  EXPECT_LT(j["gate_memory_share"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["gate_local_share"].get<double>(), 1.0 - j["gate_memory_share"].get<double>());
  EXPECT_TRUE(fs::exists(d.file("run") + "/summary.json"));
}

// Training on the exact path (--global-path exact): finite, falling losses, the path stored in the
// checkpoint, and every memory of the trained model verified by the certificate checker.
// State matching from a run: the window is the matched hybrid's local width (W_loc + chunk - 1
// in window mode) plus its measured support, with the hybrid's local geometry copied.
TEST(LmTrainer, MatchRunUsesTheHybridsLocalWidth) {
  REQUIRE_DATA();
  TempDir d("lm-match");
  TrainOptions h = tiny_options(d.file("hybrid"), 4);
  h.set("local_window", 8);  // window mode, chunk 32: local width 39
  h.set("eval_every", 0);
  h.set("eval_windows", 2);
  h.set("batch", 2);
  Trainer{h}.run();
  const double support = average_support_from_run(d.file("hybrid"));
  TrainOptions w = tiny_options(d.file("swa"), 1);
  w.preset = "tiny-swa";
  w.match_run = d.file("hybrid");
  w.set("batch", 2);
  Trainer t(w);
  const auto a = lm_config_from_json(t.config_json().at("model")).attention;
  EXPECT_EQ(a.hybrid.local, layers::LocalPath::kWindow);
  EXPECT_EQ(a.hybrid.local_width(), 39);
  EXPECT_EQ(a.window, 39 + std::llround(support));
  TrainOptions bad = tiny_options(d.file("bad"), 1);
  bad.preset = "tiny-swa";
  bad.set("local", "window");
  EXPECT_THROW(Trainer{bad}, InvalidArgument);
}

TEST(LmTrainer, TinyTrainsOnTheExactPath) {
  REQUIRE_DATA();
  TempDir d("lm-exact");
  TrainOptions o = tiny_options(d.file("run"), 30);
  o.set("global_path", "exact");
  o.set("eval_every", 0);
  Trainer t(o);
  TrainResult r = t.run();
  ASSERT_EQ(r.steps.size(), 30u);
  for (const auto& st : r.steps) EXPECT_TRUE(std::isfinite(st.loss)) << st.step;
  EXPECT_LT(r.steps.back().loss, r.steps.front().loss - 1.0);
  LoadedCheckpoint ck = load_checkpoint(d.file("run"), [](layers::LmConfig& m) {
    EXPECT_EQ(m.attention.hybrid.path, layers::GlobalPath::kExact);
    m.attention.hybrid.certify = true;
  });
  DataSpec s;
  s.corpus = "shakespeare";
  s.data_dir = data_dir();
  EvalOptions eo;
  eo.split = Split::kValid;
  eo.seq = 64;
  eo.windows = 8;
  EvalResult e = evaluate(ck.model, Corpus::load(s), eo);
  for (const auto& l : e.diagnostics) {
    EXPECT_EQ(l.certified_units, 8 * 2);
    EXPECT_EQ(l.verified_units, l.certified_units);
  }
  // Resuming on the other path is refused.
  TrainOptions again = tiny_options(d.file("run"), 40);
  again.resume = true;
  again.set("global_path", "batched");
  EXPECT_THROW(Trainer{again}, InvalidArgument);
}

// Bit-identical resume: the batch of step s is a pure function of (seed, s); parameters, AdamW
// moments and step counts, and the torch generator are restored bit for bit; the same thread count
// gives the same reduction order. So every loss after the resume equals the uninterrupted run's
// exactly (EXPECT_EQ on doubles, not a tolerance).
TEST(LmTrainer, ResumeAfterSimulatedCrashIsBitIdentical) {
  REQUIRE_DATA();
  TempDir d("lm-resume");
  TrainOptions o = tiny_options(d.file("a"), 20);
  o.set("checkpoint_every", 5);
  o.set("eval_every", 5);
  Trainer a(o);
  TrainResult ra = a.run();

  o.out = d.file("b");
  std::vector<StepRecord> rb;
  {
    Trainer b(o);
    TrainResult r1 = b.run(/*stop_after=*/13);  // "crash" at step 13: last checkpoint is step 10
    EXPECT_EQ(r1.end_step, 13);
  }
  EXPECT_THROW(Trainer{o}, InvalidArgument);  // the directory holds a run: --resume required
  o.resume = true;
  Trainer b2(o);
  EXPECT_EQ(b2.step(), 10);
  TrainResult r2 = b2.run();
  ASSERT_EQ(r2.steps.size(), 10u);
  for (std::size_t i = 0; i < 10; ++i) {
    const auto& x = ra.steps[10 + i];
    const auto& y = r2.steps[i];
    EXPECT_EQ(x.step, y.step);
    EXPECT_EQ(x.loss, y.loss) << "step " << x.step;
    EXPECT_EQ(x.grad_norm, y.grad_norm) << "step " << x.step;
    EXPECT_EQ(x.lr, y.lr);
  }
  EXPECT_EQ(ra.final_valid_bpc, r2.final_valid_bpc);
  auto pa = a.model()->parameters(), pb = b2.model()->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "parameter " << i;
  // The metrics written between the checkpoint and the crash were dropped and replayed.
  EXPECT_EQ(logged_losses(d.file("a")), logged_losses(d.file("b")));
  // A changed setting on resume is refused.
  o.set("batch", 4);
  EXPECT_THROW(Trainer{o}, InvalidArgument);
}

TEST(LmTrainer, KillNineDuringTrainingThenResumeMatchesUninterruptedRun) {
  REQUIRE_DATA();
#ifndef SVATTN_CLI
  GTEST_SKIP() << "svattn CLI not built";
#else
  TempDir d("lm-kill");
  const std::string bin = SVATTN_CLI;
  auto args = [&](const std::string& out) {
    return std::vector<std::string>{"train", "--preset", "tiny", "--corpus", "shakespeare", "--data-dir",
                                    data_dir(), "--steps", "40", "--out", out, "--seed", "11", "--threads", "1",
                                    "--checkpoint-every", "5", "--eval-every", "20", "--quiet", "--no-plot"};
  };
  auto ref = svattn::test::run_binary(bin, args(d.file("ref")), d);
  ASSERT_EQ(ref.code, 0) << ref.err;

  std::vector<std::string> a = args(d.file("crash"));
  a.insert(a.begin(), bin);
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  // Kill it once a checkpoint past step 20 exists (mid-run, possibly mid-write of the next one).
  const svattn::support::Stopwatch waited;
  bool killed = false;
  while (waited.seconds() < 60) {
    const std::string latest = svattn::test::read_text(d.file("crash") + "/LATEST");
    if (latest.rfind("ckpt-", 0) == 0 && std::stoll(latest.substr(5)) >= 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(37));
      killed = ::kill(pid, SIGKILL) == 0;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(killed) << "the run ended or never checkpointed";
  ASSERT_TRUE(WIFSIGNALED(status));
  auto res = svattn::test::run_binary(
      bin, {"train", "--resume", "--out", d.file("crash"), "--steps", "40", "--data-dir", data_dir(), "--threads",
            "1", "--quiet", "--no-plot"},
      d);
  ASSERT_EQ(res.code, 0) << res.err;
  EXPECT_EQ(logged_losses(d.file("ref")), logged_losses(d.file("crash")));
  auto e1 = svattn::test::run_binary(bin, {"eval", "--checkpoint", d.file("ref"), "--split", "valid", "--windows",
                                           "8", "--data-dir", data_dir(), "--threads", "1", "--json"}, d);
  auto e2 = svattn::test::run_binary(bin, {"eval", "--checkpoint", d.file("crash"), "--split", "valid",
                                           "--windows", "8", "--data-dir", data_dir(), "--threads", "1", "--json"}, d);
  ASSERT_EQ(e1.code, 0) << e1.err;
  ASSERT_EQ(e2.code, 0) << e2.err;
  EXPECT_EQ(nlohmann::json::parse(e1.out)["bpc"].get<double>(), nlohmann::json::parse(e2.out)["bpc"].get<double>());
#endif
}

// The allocator setting (docs/lm.md "Allocator") changes addresses only: the same run with glibc's
// defaults logs the same losses bit for bit, and each header says which setting was used.
TEST(LmTrainer, AllocatorSettingDoesNotChangeWhatIsComputed) {
  REQUIRE_DATA();
#ifndef SVATTN_CLI
  GTEST_SKIP() << "svattn CLI not built";
#else
  TempDir d("lm-malloc");
  auto args = [&](const std::string& out) {
    return std::vector<std::string>{"train", "--preset", "tiny", "--corpus", "shakespeare", "--data-dir",
                                    data_dir(), "--steps", "12", "--out", out, "--seed", "5", "--threads", "1",
                                    "--eval-every", "6", "--quiet", "--no-plot"};
  };
  auto tuned = svattn::test::run_binary(SVATTN_CLI, args(d.file("tuned")), d);
  ::setenv("SVATTN_NO_MALLOC_TUNING", "1", 1);
  auto plain = svattn::test::run_binary(SVATTN_CLI, args(d.file("plain")), d);
  ::unsetenv("SVATTN_NO_MALLOC_TUNING");
  ASSERT_EQ(tuned.code, 0) << tuned.err;
  ASSERT_EQ(plain.code, 0) << plain.err;
#if defined(__GLIBC__)
  EXPECT_NE(tuned.out.find("allocator: glibc, freed memory kept for reuse"), std::string::npos) << tuned.out;
  EXPECT_NE(plain.out.find("allocator: glibc defaults (SVATTN_NO_MALLOC_TUNING)"), std::string::npos) << plain.out;
#endif
  const auto a = logged_losses(d.file("tuned")), b = logged_losses(d.file("plain"));
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
#endif
}

// ------------------------------------------------------------------ checkpoints and eval

class LmCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_shakespeare()) return;
    dir_ = new TempDir("lm-ckpt");
    TrainOptions o = tiny_options(dir_->file("run"), 20);
    Trainer t(o);
    t.run();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  /// A copy of the trained run to damage.
  std::string copy_run(const TempDir& d) const {
    const std::string to = d.file("copy");
    fs::copy(dir_->file("run"), to, fs::copy_options::recursive);
    return to;
  }
  static std::string ckpt_of(const std::string& run) {
    std::string n = svattn::test::read_text(run + "/LATEST");
    n.pop_back();
    return run + "/" + n;
  }
  static TempDir* dir_;
};
TempDir* LmCheckpoint::dir_ = nullptr;

TEST_F(LmCheckpoint, EvalIsDeterministic) {
  REQUIRE_DATA();
  DataSpec s;
  s.corpus = "shakespeare";
  s.data_dir = data_dir();
  Corpus c = Corpus::load(s);
  EvalOptions eo;
  eo.split = Split::kValid;
  eo.seq = 64;
  eo.windows = 24;
  LoadedCheckpoint a = load_checkpoint(dir_->file("run"));
  LoadedCheckpoint b = load_checkpoint(ckpt_of(dir_->file("run")));
  EXPECT_EQ(a.step, 20);
  EvalResult ra = evaluate(a.model, c, eo), rb = evaluate(b.model, c, eo), ra2 = evaluate(a.model, c, eo);
  EXPECT_EQ(ra.bpc, rb.bpc);
  EXPECT_EQ(ra.bpc, ra2.bpc);
  EXPECT_EQ(ra.targets, 24 * 64);
  EXPECT_TRUE(std::isfinite(ra.bpc));
  EXPECT_NEAR(ra.bpc, ra.nll / std::log(2.0), 1e-12);
  // A whole split: every window, stride seq (a small corpus keeps it quick).
  Corpus small = Corpus::from_bytes("pattern", pattern_bytes(30000));
  eo.windows = 0;
  EvalResult all = evaluate(a.model, small, eo);
  const auto [vb, ve] = small.range(Split::kValid);
  EXPECT_EQ(all.windows, (ve - vb - 1) / 64);
  EXPECT_EQ(all.targets, all.windows * 64);
}

TEST_F(LmCheckpoint, CorruptOrTruncatedCheckpointIsAFormatErrorNamingTheFile) {
  REQUIRE_DATA();
  TempDir d("lm-corrupt");
  auto expect_format_error = [](const std::string& path, const std::string& needle) {
    try {
      load_checkpoint(path);
      ADD_FAILURE() << "expected FormatError";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  {
    const std::string run = copy_run(d);
    const std::string model = ckpt_of(run) + "/model.pt";
    fs::resize_file(model, fs::file_size(model) / 2);
    expect_format_error(run, "model.pt");
    // Resuming a run whose checkpoint is truncated fails the same way.
    TrainOptions o = tiny_options(run, 30);
    o.resume = true;
    EXPECT_THROW(Trainer{o}, FormatError);
#ifdef SVATTN_CLI
    auto r = svattn::test::run_binary(SVATTN_CLI, {"eval", "--checkpoint", run, "--data-dir", data_dir()}, d);
    EXPECT_EQ(r.code, 2);
    // One error line (besides an optional "note:" about OpenBLAS kernels, blas.h).
    std::vector<std::string> errors;
    for (const auto& l : r.err_lines())
      if (l.rfind("note:", 0) != 0) errors.push_back(l);
    ASSERT_EQ(errors.size(), 1u) << r.err;
    EXPECT_EQ(errors[0].rfind("svattn: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("model.pt"), std::string::npos) << r.err;
#endif
    fs::remove_all(run);
  }
  {
    const std::string run = copy_run(d);
    const std::string optim = ckpt_of(run) + "/optim.pt";
    std::fstream f(optim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(optim) / 2));
    f.put('\x5a');
    f.close();
    expect_format_error(run, "optim.pt");
    fs::remove_all(run);
  }
  {
    // Bytes that pass no manifest: a damaged model.pt with a matching (forged) manifest still
    // fails to load with a typed error.
    const std::string run = copy_run(d);
    const std::string ck = ckpt_of(run);
    { std::ofstream(ck + "/model.pt", std::ios::trunc) << "not a torch archive"; }
    auto m = nlohmann::json::parse(svattn::test::read_text(ck + "/MANIFEST.json"));
    const std::string bytes = "not a torch archive";
    m["files"]["model.pt"] = {{"bytes", bytes.size()},
                              {"sha256", sha256_hex(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size())}};
    { std::ofstream(ck + "/MANIFEST.json", std::ios::trunc) << m.dump(); }
    expect_format_error(run, "model.pt");
    { std::ofstream(ck + "/MANIFEST.json", std::ios::trunc) << "{\"vers"; }
    expect_format_error(run, "MANIFEST.json");
    fs::remove_all(run);
  }
  {
    const std::string run = copy_run(d);
    { std::ofstream(run + "/LATEST", std::ios::trunc) << "ckpt-000000999\n"; }
    expect_format_error(run, "ckpt-000000999");
  }
  EXPECT_THROW(load_checkpoint(d.file("nothing-here")), IoError);
}

TEST_F(LmCheckpoint, DumpKeysWritesNormalisedKeysOfTheRequestedHead) {
  REQUIRE_DATA();
  LoadedCheckpoint ck = load_checkpoint(dir_->file("run"));
  torch::Tensor tok = torch::tensor(std::vector<std::int64_t>{'a', 'b', 'a', 'c', 'a', 'b'});
  LayerKeys k0 = learned_keys(ck.model, tok, 0, 1);
  ASSERT_EQ(k0.keys.size(0), 6);
  ASSERT_EQ(k0.keys.size(1), 16);  // d 32 / 2 heads
  EXPECT_TRUE(k0.normalized);
  EXPECT_TRUE(torch::allclose(k0.keys.norm(2, 1), torch::ones({6}, torch::kFloat64), 1e-6, 1e-6));
  // Layer 0 keys depend only on the byte; layer 1 keys also on the context.
  EXPECT_TRUE(torch::equal(k0.keys[0], k0.keys[2]));
  EXPECT_FALSE(torch::equal(k0.keys[0], k0.keys[1]));
  LayerKeys k1 = learned_keys(ck.model, tok, 1, 0);
  EXPECT_FALSE(torch::equal(k1.keys[0], k1.keys[2]));
  EXPECT_GT(k0.bandwidth, 0);
  EXPECT_DOUBLE_EQ(k0.C, 1.0 / 16);
  EXPECT_THROW(learned_keys(ck.model, tok, 2, 0), InvalidArgument);
  EXPECT_THROW(learned_keys(ck.model, tok, 0, 2), InvalidArgument);
#ifdef SVATTN_CLI
  TempDir d("lm-keys");
  auto r = svattn::test::run_binary(SVATTN_CLI,
                                    {"dump-keys", "--checkpoint", dir_->file("run"), "--layer", "1", "--head", "0",
                                     "--tokens", "200", "--out", d.file("keys.npy"), "--data-dir", data_dir()},
                                    d);
  ASSERT_EQ(r.code, 0) << r.err;
  RowMatrix m = read_matrix(d.file("keys.npy"));
  EXPECT_EQ(m.rows(), 200);
  EXPECT_EQ(m.cols(), 16);
  EXPECT_NEAR(m.row(57).norm(), 1.0, 1e-6);
  auto bad = svattn::test::run_binary(SVATTN_CLI,
                                      {"dump-keys", "--checkpoint", dir_->file("run"), "--layer", "5", "--head", "0",
                                       "--out", d.file("k.npy"), "--data-dir", data_dir()},
                                      d);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--layer 5"), std::string::npos) << bad.err;
#endif
}

// Certified inference on a trained model: every (window, layer, head, chunk) memory of the exact
// path is checked by the independent verifier; the batched path's partitions are compared with it.
TEST_F(LmCheckpoint, EvalCertifiesEveryMemoryOnTheExactPath) {
  REQUIRE_DATA();
  DataSpec s;
  s.corpus = "shakespeare";
  s.data_dir = data_dir();
  Corpus c = Corpus::load(s);
  EvalOptions eo;
  eo.split = Split::kValid;
  eo.seq = 64;
  eo.windows = 6;
  LoadedCheckpoint ck = load_checkpoint(dir_->file("run"), [](layers::LmConfig& m) {
    m.attention.hybrid.path = layers::GlobalPath::kExact;
    m.attention.hybrid.certify = true;
    m.attention.hybrid.check_agreement = true;
  });
  EvalResult r = evaluate(ck.model, c, eo);
  ASSERT_EQ(r.diagnostics.size(), 2u);
  for (const auto& d : r.diagnostics) {
    // 6 windows x 2 heads x 1 chunk with a memory (seq 64, chunk 32), in one batch.
    EXPECT_EQ(d.certified_units, 12);
    EXPECT_EQ(d.verified_units, d.certified_units);
    EXPECT_GE(d.support_mean, 16.0 - 1e-9);
    EXPECT_GE(d.partition_agreement, 0.0);
    EXPECT_LE(d.partition_agreement, 1.0);
    EXPECT_EQ(d.agreement_units, 12);
  }
  // The exact path computes what the batched path's evaluation would up to its solver: the same
  // windows, a BPC within 0.05 bits.
  LoadedCheckpoint bat = load_checkpoint(dir_->file("run"));
  EvalResult rb = evaluate(bat.model, c, eo);
  EXPECT_NEAR(r.bpc, rb.bpc, 0.05);
#ifdef SVATTN_CLI
  TempDir d("lm-certify");
  auto e = svattn::test::run_binary(SVATTN_CLI,
                                    {"eval", "--checkpoint", dir_->file("run"), "--data-dir", data_dir(),
                                     "--split", "valid", "--windows", "4", "--threads", "1",
                                     "--global-path", "exact", "--certify", "--check-agreement", "--json"},
                                    d);
  ASSERT_EQ(e.code, 0) << e.err;
  auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["global_path"], "exact");
  ASSERT_EQ(j["layers"].size(), 2u);
  for (const auto& l : j["layers"]) {
    EXPECT_EQ(l["certified_memories"].get<long>(), 8);
    EXPECT_EQ(l["verified_memories"].get<long>(), 8);
    EXPECT_EQ(l["verified_share"].get<double>(), 1.0);
    EXPECT_EQ(l["agreement_units"].get<long>(), 8);
    EXPECT_TRUE(l.contains("partition_agreement"));
  }
  // The batched path carries no certificate: --certify without the exact path is bad input.
  auto b = svattn::test::run_binary(SVATTN_CLI,
                                    {"eval", "--checkpoint", dir_->file("run"), "--data-dir", data_dir(),
                                     "--windows", "1", "--certify"},
                                    d);
  EXPECT_EQ(b.code, 2);
  EXPECT_NE(b.err.find("--global-path exact"), std::string::npos) << b.err;
#endif
}

}  // namespace
}  // namespace svattn::lm
