// E5's presets (the fair geometry, docs/experiments.md "E5") and the ranges and relations of its
// `--set` keys.
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

// The fair geometry (docs/experiments.md "E5", preset cpu): sequences of 384 bytes = 6 chunks of
// 64, two-layer models, so that a window state-matched to a hybrid (W = local width + measured
// |S ∪ E|) reaches back 2 (W - 1) < 384 bytes and cannot see a whole sequence; both local paths
// (chunk-local, the paper's; sliding with W_loc 16), each against its state-matched window and its
// memory-off ablation, plus full softmax. Sized for about an hour of this 2-core machine.
Settings e5_fair_preset() {
  Settings p;
  p.corpus = "enwik8";
  p.pairs = {{"hybrid-400k", "swa-400k", "softmax-400k", "chunk", "hybrid-local-400k"},
             {"hybrid-window-400k", "swa-window-400k", "", "chunk", "hybrid-window-local-400k"}};
  p.seeds = 3;
  p.seeds_every_pair = true;
  p.steps = 260;
  p.batch = 4;
  p.seq = 384;
  p.chunk = 64;
  p.local_window = 16;
  p.lr = 2e-3;
  p.warmup = 20;
  p.eval_every = 26;
  p.eval_windows = 16;
  p.test_windows = 128;
  p.workers = 2;
  p.note =
      "cpu preset (fair geometry): the 400k models (d 128, 2 layers, 4 heads), chunk 64, sequences "
      "of 384 bytes (6 chunks), sliding local W_loc 16, 260 steps of 4 x 384 bytes at lr 2e-3, 3 "
      "seeds of every model, two trained side by side";
  return p;
}



}  // namespace

Settings e5_preset(const std::string& name) {
  Settings p;
  if (name == "tiny") {
    // Every model of the fair geometry (the cpu preset's pairs) for 3 steps: 4 chunks of 16.
    p = e5_fair_preset();
    p.corpus = "shakespeare";
    p.seeds = 2;
    p.steps = 3;
    p.batch = 2;
    p.seq = 64;
    p.chunk = 16;
    p.local_window = 4;
    p.warmup = 1;
    p.eval_every = 2;
    p.eval_windows = 2;
    p.test_windows = 4;
    p.workers = 1;
    p.note = "test preset: the cpu preset's seven models with chunk 16 and W_loc 4, 3 steps of 2 x 64 bytes "
             "on tiny-shakespeare";
    return p;
  }
  if (name == "paper") {
    p.corpus = "enwik8";
    p.pairs = {{"hybrid-3m", "swa-3m", "softmax-3m", "chunk", ""},
               {"hybrid-10m", "swa-10m", "", "chunk", ""},
               {"hybrid-token-10m", "swa-10m", "", "token", ""}};
    p.seeds = 3;
    p.steps = 5000;
    p.batch = 16;
    p.seq = 256;
    p.warmup = 200;
    p.eval_every = 250;
    p.eval_windows = 64;
    p.test_windows = 0;
    p.note = "3m presets (d 256, 4 layers) 3 seeds; 10m pair (d 320, 8 layers) with both gates, 1 seed";
    return p;
  }
  if (name == "cpu") return e5_fair_preset();
  // quick: the cpu preset's fair geometry and seven models at a few steps (a smoke run of the
  // pipeline, far from converged).
  p = e5_fair_preset();
  p.seeds = 2;
  p.steps = 24;
  p.warmup = 4;
  p.eval_every = 8;
  p.eval_windows = 4;
  p.test_windows = 16;
  p.note = "quick preset: the cpu preset's seven models (fair geometry) for 24 steps of 4 x 384 bytes, "
           "2 seeds — far from converged";
  return p;
}

json preset(const std::string& name) { return e5_preset(name); }

namespace {

// The checks between E5's keys and of its pairs (ranges().relations).
void e5_relations(const std::string& id, const json& s) {
  const std::vector<std::string> names = lm::preset_names();
  const auto known = [&](const json& v) {
    return v.is_string() && std::find(names.begin(), names.end(), v.get<std::string>()) != names.end();
  };
  const auto& pairs = s["pairs"];
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const json& q = pairs[i];
    const std::string field = id + ".pairs[" + std::to_string(i) + "]";
    const bool ok = q.is_object() && q.contains("hybrid") && known(q["hybrid"]) &&
                    q.contains("swa") && known(q["swa"]) && q.contains("reference") &&
                    (q["reference"] == "" || known(q["reference"])) && q.contains("gate") &&
                    (q["gate"] == "chunk" || q["gate"] == "token") &&
                    (!q.contains("ablation") || q["ablation"] == "" || known(q["ablation"]));
    if (!ok)
      bad(field, "{\"hybrid\", \"swa\", \"reference\" (\"\" = none), \"ablation\" (optional, "
                 "\"\" = none): LM presets, \"gate\": chunk | token}",
          q);
  }
  check_lm_run(id, s);
}

}  // namespace

RangeTable ranges() {
  RangeTable t;
  t.keys = {{"corpus", 0, 0, false, 0, 0, {"enwik8", "shakespeare"}},
            {"pairs", 0, 0, false, 1, 8},
            {"seeds", 1, 100},
            {"seeds_every_pair"},
            {"steps", 1, 10000000},
            {"batch", 1, static_cast<double>(lm::TrainHyper::kMaxBatch)},
            {"seq", 2, static_cast<double>(lm::TrainHyper::kMaxSeq)},
            {"warmup", 0, 10000000},
            {"eval_every", 0, 10000000},
            {"eval_windows", 0, 10000000},
            {"test_windows", 0, 10000000},
            {"chunk", 0, static_cast<double>(lm::TrainHyper::kMaxSeq)},
            {"local_window", 0, static_cast<double>(lm::TrainHyper::kMaxSeq)},
            {"note"},
            {"device"},
            {"max_seconds", 0, 1e7},
            {"lr", 0, 1},
            {"workers", 1, 64}};
  t.relations = e5_relations;
  return t;
}

}  // namespace svattn::experiments::e5_char_lm
