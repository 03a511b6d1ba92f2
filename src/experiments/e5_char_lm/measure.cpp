// E5's measurement: every pair's hybrid, state-matched window, reference and ablation trained and
// tested per seed, side by side.
#include "experiments/e5_char_lm/e5_char_lm.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "common.h"
#include "internal.h"
#include "lm_run_checks.h"
#include "svattn/errors.h"
#include "experiments/framework/statistics.h"
#include "svattn/lm/position_eval.h"
#include "svattn/lm/trainer.h"

namespace svattn::experiments::e5_char_lm {

using nlohmann::json;

namespace {

void read_metrics(Run& r) {
  std::ifstream in((std::filesystem::path(r.dir) / "metrics.jsonl").string());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    const std::string type = j.value("type", "");
    const double step = j.value("step", 0.0);
    if (type == "valid" && j.contains("bpc")) r.valid_curve.emplace_back(step, j["bpc"].get<double>());
    if (type == "train") {
      r.train_seconds = j.value("elapsed_s", r.train_seconds);
      if (j.contains("gate_memory_share") && j["gate_memory_share"].is_number())
        r.gate_curve.emplace_back(step, j["gate_memory_share"].get<double>());
      if (j.contains("support_mean") && j["support_mean"].is_number())
        r.support_curve.emplace_back(step, j["support_mean"].get<double>());
      if (j.contains("layers") && j["layers"].is_array()) {
        r.layer_gate.clear();
        r.layer_support.clear();
        for (const auto& l : j["layers"]) {
          const auto num = [&](const char* k) {
            return l.contains(k) && l[k].is_number() ? l[k].get<double>() : std::nan("");
          };
          r.layer_gate.push_back(num("gate_memory_share"));
          r.layer_support.push_back(num("support_mean"));
        }
      }
    }
  }
}

/// One model's run. `length` ends its directory's name ("-stepsN" under a `--set E5.steps`, see
/// scale_to_steps), so a run of another length is never resumed.
Run train_and_test(const Settings& p, const std::string& preset, const std::string& gate, std::uint64_t seed,
                   const std::string& match_run, const std::string& length, const ExperimentOptions& o) {
  Run r;
  r.preset = preset;
  r.seed = seed;
  r.dir = (std::filesystem::path(o.out_dir) / "E5-runs" / (preset + "-s" + std::to_string(seed) + length)).string();
  lm::TrainOptions t;
  t.preset = preset;
  t.data.corpus = p.corpus;
  t.data.data_dir = o.data_dir;
  t.out = r.dir;
  t.steps = p.steps;
  t.resume = true;  // a finished run is reused, an interrupted one continues
  t.set("seed", seed);
  t.set("batch", p.batch);
  t.set("seq", p.seq);
  t.set("warmup", p.warmup);
  if (p.lr > 0) t.set("lr", p.lr);
  t.set("eval_every", p.eval_every);
  t.set("eval_windows", p.eval_windows);
  t.set("checkpoint_every", std::max<std::int64_t>(p.eval_every, p.steps / 10));
  t.set("log_every", std::max<std::int64_t>(1, p.steps / 50));
  if (preset.rfind("hybrid", 0) == 0) t.set("gate", gate);
  if (p.chunk > 0) t.set("chunk", p.chunk);
  // W_loc only for the window-mode hybrids (a local_window option switches a hybrid to window
  // mode); their state-matched windows take it from the matched run.
  if (p.local_window > 0 && preset.rfind("hybrid-window", 0) == 0) t.set("local_window", p.local_window);
  if (!match_run.empty()) {
    t.match_run = match_run;
    r.matched_support = lm::average_support_from_run(match_run);
  }
  t.threads = 1;
  t.device = p.device;
  t.max_seconds = p.max_seconds;
  t.progress = o.progress;
  t.plot = false;
  lm::Trainer trainer(t);
  trainer.run();
  r.steps = trainer.step();
  r.parameters = trainer.parameters();
  const auto& a = trainer.preset().model.attention;
  if (a.type == layers::AttentionType::kSlidingWindow) r.window = a.window;
  r.chunk = a.hybrid.chunk;
  // One pass over the test windows gives the test BPC and its split by position in the chunk.
  lm::PositionEvalOptions eo;
  eo.split = lm::Split::kTest;
  eo.seq = p.seq;
  eo.windows = p.test_windows;
  eo.period = r.chunk;
  const lm::PositionEval ev = lm::evaluate_by_position(trainer.model(), trainer.corpus(), eo);
  r.test_bpc = ev.bpc;
  r.test_windows = ev.windows;
  r.position_bpc = ev.bpc_by_position;
  // The bandwidth only where a memory reads with it (a memory-off ablation keeps an unused one).
  if (a.type == layers::AttentionType::kHybrid && a.hybrid.memory) r.layer_sigma = lm::sigma_per_layer(trainer.model());
  read_metrics(r);
  r.tokens_per_second = r.train_seconds > 0 ? static_cast<double>(r.steps * p.batch * p.seq) / r.train_seconds : 0;
  return r;
}

/// Whether a `--set` item gives E5's `key` ("E5.key=…", or "key=…" unscoped).
bool given(const ExperimentOptions& o, const std::string& key) {
  return std::any_of(o.overrides.begin(), o.overrides.end(), [&](const Override& v) {
    return v.key == key && (v.scope.empty() || v.scope == kInfo.id);
  });
}

}  // namespace

// internal.h; docs/experiments.md "Ranges of the `--set` keys" (E5 `steps`).
std::string scale_to_steps(Settings& p, std::int64_t preset_steps, const ExperimentOptions& o) {
  if (!given(o, "steps")) return "";
  const double f = static_cast<double>(p.steps) / static_cast<double>(preset_steps);
  if (!given(o, "warmup"))
    p.warmup = std::max<std::int64_t>(1, std::llround(static_cast<double>(p.warmup) * f));
  if (!given(o, "eval_every"))
    p.eval_every = std::max<std::int64_t>(1, std::llround(static_cast<double>(p.eval_every) * f));
  p.note += "; steps overridden to " + std::to_string(p.steps) + " (--set E5.steps)";
  return "-steps" + std::to_string(p.steps);
}

Result measure(const ExperimentOptions& o) {
  Result res;
  res.begin(o);
  const Settings preset = e5_preset(o.preset);
  Settings p = detail::with_overrides(preset, kInfo.id, o);
  const std::string length = scale_to_steps(p, preset.steps, o);
  lm::set_threads(1);
  ensure_dir(o.out_dir);
  for (int i = 0; i < p.seeds; ++i) res.seeds.push_back(o.seed + static_cast<std::uint64_t>(i));
  res.runs_dir = (std::filesystem::path(o.out_dir) / "E5-runs").string();
  // Per pair: the hybrid, then the sliding window matched to that seed's measured support, then the
  // reference. Only the first pair runs every seed; later (10m) pairs run the first seed.
  res.pairs.resize(p.pairs.size());
  std::vector<std::function<void()>> jobs;  // one per (pair, seed): its models in order
  for (std::size_t pi = 0; pi < p.pairs.size(); ++pi) {
    PairResult& pr = res.pairs[pi];
    pr.pair = p.pairs[pi];
    const std::size_t n_seeds = pi == 0 || p.seeds_every_pair ? res.seeds.size() : 1;
    pr.hybrid.resize(n_seeds);
    pr.swa.resize(n_seeds);
    if (!pr.pair.reference.empty()) pr.reference.resize(n_seeds);
    if (!pr.pair.ablation.empty()) pr.ablation.resize(n_seeds);
    for (std::size_t si = 0; si < n_seeds; ++si) {
      jobs.emplace_back([&p, &o, &pr, &res, &length, si] {
        const Pair& q = pr.pair;
        const std::uint64_t s = res.seeds[si];
        pr.hybrid[si] = train_and_test(p, q.hybrid, q.gate, s, "", length, o);
        pr.swa[si] = train_and_test(p, q.swa, q.gate, s, pr.hybrid[si].dir, length, o);
        if (!q.reference.empty()) pr.reference[si] = train_and_test(p, q.reference, q.gate, s, "", length, o);
        if (!q.ablation.empty()) pr.ablation[si] = train_and_test(p, q.ablation, q.gate, s, "", length, o);
      });
    }
  }
  detail::run_jobs(jobs, p.device == "cpu" ? p.workers : 1);
  res.corpus_label = lm::Corpus::load({p.corpus, "", o.data_dir}).label();
  res.settings = p;
  res.end();
  return res;
}

ExperimentResult run(const ExperimentOptions& o) { return render(measure(o), o); }

}  // namespace svattn::experiments::e5_char_lm
