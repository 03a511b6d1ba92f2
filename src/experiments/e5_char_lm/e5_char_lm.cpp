// E5 — character LM: hybrid SV attention vs a state-matched sliding-window transformer (and full
// softmax as a reference), equal steps and tokens, several seeds, test-split BPC, paired t-test.
// Runs go through the resumable trainer (src/lm), one run directory per model and seed under
// <out>/E5-runs, so an interrupted paper run continues where it stopped.
#include "svattn/experiments/e5_char_lm/e5_char_lm.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "common.h"
#include "lm_run_checks.h"
#include "svattn/errors.h"
#include "svattn/experiments/framework/statistics.h"
#include "svattn/lm/position_eval.h"
#include "svattn/lm/trainer.h"

namespace svattn::experiments::e5_char_lm {

using nlohmann::json;

// With defaults: results written before a key existed still read (absent = the default).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Pair, hybrid, swa, reference, gate, ablation)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Settings, corpus, pairs, seeds, seeds_every_pair, steps,
                                                batch, seq, warmup, eval_every, eval_windows,
                                                test_windows, chunk, local_window, note, device,
                                                max_seconds, lr, workers)

double Run::last_fifth_improvement() const {
  if (valid_curve.size() < 2 || steps <= 0) return std::nan("");
  const double from = 0.8 * static_cast<double>(steps);
  for (const auto& [step, bpc] : valid_curve)
    if (step >= from && step < valid_curve.back().first) return (bpc - valid_curve.back().second) / bpc;
  return std::nan("");
}

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

Run train_and_test(const Settings& p, const std::string& preset, const std::string& gate,
                          std::uint64_t seed, const std::string& match_run, const ExperimentOptions& o) {
  Run r;
  r.preset = preset;
  r.seed = seed;
  // A --steps override gets its own run directory, so a run of another length is never resumed.
  const std::string length = o.steps > 0 ? "-steps" + std::to_string(o.steps) : "";
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


template <typename T>
T field(const json& j, const char* key) {
  return detail::json_field<T>(j, key, "E5 result");
}

using detail::number_or_null;

json numbers(const std::vector<double>& v) { return detail::json_array(v, number_or_null); }

std::vector<double> numbers_from(const json& j, const char* key) {
  std::vector<double> v;
  if (!j.contains(key)) return v;
  const json& a = j.at(key);
  if (!a.is_array()) throw FormatError(std::string("E5 result: field `") + key + "` has the wrong type");
  for (const auto& x : a) {
    if (!x.is_null() && !x.is_number())
      throw FormatError(std::string("E5 result: field `") + key + "` holds a non-number");
    v.push_back(x.is_null() ? std::nan("") : x.get<double>());
  }
  return v;
}

// A run as E5.json has always written it (optional keys only where they apply); the typed result
// uses the same object, so `pairs[].runs` and `result` agree.
json run_json(const Run& r) {
  json rj = {{"preset", r.preset}, {"seed", r.seed}, {"run_dir", r.dir}, {"parameters", r.parameters},
             {"chunk", r.chunk}, {"test_bpc", r.test_bpc}, {"test_windows", r.test_windows},
             {"train_seconds", r.train_seconds}, {"tokens_per_second", r.tokens_per_second},
             {"valid_curve", r.valid_curve}};
  if (r.window > 0) rj["window"] = r.window;
  if (r.steps > 0) rj["steps"] = r.steps;
  if (std::isfinite(r.matched_support)) rj["matched_support"] = r.matched_support;
  if (!r.gate_curve.empty()) rj["gate_memory_share_curve"] = r.gate_curve;
  if (!r.support_curve.empty()) rj["support_curve"] = r.support_curve;
  rj["last_fifth_valid_improvement"] = number_or_null(r.last_fifth_improvement());
  if (!r.layer_gate.empty()) rj["layer_gate_memory_share"] = numbers(r.layer_gate);
  if (!r.layer_support.empty()) rj["layer_support"] = numbers(r.layer_support);
  if (!r.layer_sigma.empty()) rj["layer_sigma"] = numbers(r.layer_sigma);
  if (!r.position_bpc.empty()) rj["position_bpc"] = numbers(r.position_bpc);
  return rj;
}

Run run_from_json(const json& j) {
  using Curve = std::vector<std::pair<double, double>>;
  Run r;
  r.preset = field<std::string>(j, "preset");
  r.seed = field<std::uint64_t>(j, "seed");
  r.dir = field<std::string>(j, "run_dir");
  r.parameters = field<std::int64_t>(j, "parameters");
  r.chunk = field<std::int64_t>(j, "chunk");
  r.test_bpc = field<double>(j, "test_bpc");
  r.test_windows = field<std::int64_t>(j, "test_windows");
  r.train_seconds = field<double>(j, "train_seconds");
  r.tokens_per_second = field<double>(j, "tokens_per_second");
  r.valid_curve = field<Curve>(j, "valid_curve");
  if (j.contains("window")) r.window = field<std::int64_t>(j, "window");
  if (j.contains("steps")) r.steps = field<std::int64_t>(j, "steps");
  if (j.contains("matched_support")) r.matched_support = field<double>(j, "matched_support");
  if (j.contains("gate_memory_share_curve")) r.gate_curve = field<Curve>(j, "gate_memory_share_curve");
  if (j.contains("support_curve")) r.support_curve = field<Curve>(j, "support_curve");
  r.layer_gate = numbers_from(j, "layer_gate_memory_share");
  r.layer_support = numbers_from(j, "layer_support");
  r.layer_sigma = numbers_from(j, "layer_sigma");
  r.position_bpc = numbers_from(j, "position_bpc");
  return r;
}

json runs_json(const std::vector<Run>& runs) { return detail::json_array(runs, run_json); }

std::vector<Run> runs_from_json(const json& j, const char* key) {
  return detail::json_array_field(j, key, "E5 result", run_from_json);
}

std::vector<double> test_bpc(const std::vector<Run>& runs) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(r.test_bpc);
  return v;
}

std::string scale_text(const Result& res) {
  const Settings& p = res.settings;
  std::ostringstream scale;
  scale << res.corpus_label << "; " << p.steps << " steps of " << p.batch << " x " << p.seq
        << " bytes per model (equal steps and tokens); " << res.seeds.size()
        << " seeds; CPU, 1 thread; "
        << (p.test_windows > 0 ? std::to_string(p.test_windows) + " evenly spaced test windows"
                               : std::string("the whole test split"));
  return scale.str();
}

std::string per_layer(const std::vector<double>& v, int digits) {
  std::string out;
  for (double x : v)
    out += (out.empty() ? "" : ", ") + (std::isfinite(x) ? fmt_fixed(x, digits) : std::string("–"));
  return out.empty() ? std::string("–") : out;
}

/// The tables and the summary rows, derived from the runs.
struct Derived {
  Table main_table{{"model", "params", "attention state", "test BPC per seed", "mean ± sd",
                    "train time / run", "tokens/s"}};
  Table conv_table{{"model", "seed", "steps", "final valid BPC", "last 20 % improvement",
                    "gate memory share per layer", "|S ∪ E| per layer", "σ per layer"}};
  Table position_table{{"model"}};
  json pairs = json::array();
  json summary = json::array();
  double worst_last_fifth = std::nan("");
  double train_seconds = 0;
};

void add_model_row(Derived& d, const Pair& pr, const std::vector<Run>& runs, const std::string& state) {
  std::string per;
  double secs = 0, tps = 0;
  for (const auto& r : runs) {
    per += (per.empty() ? "" : ", ") + fmt_fixed(r.test_bpc, 3);
    secs += r.train_seconds / runs.size();
    tps += r.tokens_per_second / runs.size();
  }
  const std::string& name = runs.front().preset;
  d.main_table.add_row({name + (name.rfind("hybrid", 0) == 0 ? " (" + pr.gate + " gate)" : ""),
                        std::to_string(runs.front().parameters), state, per,
                        fmt_mean_sd(test_bpc(runs), 3), detail::duration(secs), fmt_fixed(tps, 0)});
}

void add_convergence_row(Derived& d, const Run& r) {
  const double imp = r.last_fifth_improvement();
  if (std::isfinite(imp) && !(imp <= d.worst_last_fifth)) d.worst_last_fifth = imp;
  d.conv_table.add_row({r.preset, std::to_string(r.seed), std::to_string(r.steps),
                        r.valid_curve.empty() ? "–" : fmt_fixed(r.valid_curve.back().second, 3),
                        std::isfinite(imp) ? fmt_pct(imp, 2) : "–", per_layer(r.layer_gate, 3),
                        per_layer(r.layer_support, 1), per_layer(r.layer_sigma, 3)});
}

// The paper's numbers: 3.22M hybrid vs its window (also beside smaller models), no advantage at
// 10M (chunk-frozen gate); it has no per-token-gate result.
void add_pair_summary(Derived& d, const Pair& pr, const std::vector<double>& hb,
                      const std::vector<double>& sb, const PairedTTest& tt, double rel) {
  const std::string tag = pr.hybrid + " vs " + pr.swa;
  const bool is10m = pr.hybrid.find("10m") != std::string::npos;
  const bool is3m = pr.hybrid.find("3m") != std::string::npos;
  const bool token_gate = pr.gate == "token" && !is10m;
  const std::string paper_bpc = token_gate ? "not reported (chunk-frozen gate only)"
                                : is10m    ? "no advantage"
                                : is3m     ? "2.178 vs 2.383"
                                           : "(3.22M) 2.178 vs 2.383";
  d.summary.push_back(
      {{"metric", "test BPC, " + tag + " (mean ± sd, " + std::to_string(hb.size()) + " seeds)"},
       {"paper", paper_bpc},
       {"ours", fmt_mean_sd(hb, 3) + " vs " + fmt_mean_sd(sb, 3)}});
  const std::string p_str = std::isfinite(tt.p_two_sided) ? fmt_sci(tt.p_two_sided, 2) : "n/a (n < 2)";
  d.summary.push_back({{"metric", "relative improvement of the hybrid, " + tag + " (paired t-test p)"},
                       {"paper", token_gate ? "not reported" : is10m ? "none" : "8.6 % (p = 0.001)"},
                       {"ours", fmt_pct(rel, 1) + " (p = " + p_str + ")"}});
}

json t_test_json(const PairedTTest& tt) {
  return {{"n", tt.n}, {"mean_difference", tt.mean_difference}, {"sd_difference", tt.sd_difference},
          {"t", number_or_null(tt.t)}, {"dof", tt.dof}, {"p_two_sided", number_or_null(tt.p_two_sided)}};
}

// The hybrid against its memory-off ablation: what the SV memory adds on top of the same local path.
void add_ablation(Derived& d, const PairResult& pr, json& pj) {
  if (pr.ablation.empty()) return;
  const std::vector<double> hb = test_bpc(pr.hybrid), ab = test_bpc(pr.ablation);
  add_model_row(d, pr.pair, pr.ablation, "local path alone (memory off)");
  const PairedTTest tt = paired_t_test(ab, hb);  // positive mean: the memory lowers the BPC
  const double rel = (mean_of(ab) - mean_of(hb)) / mean_of(ab);
  pj["ablation_test_bpc"] = ab;
  pj["relative_improvement_vs_ablation"] = rel;
  pj["paired_t_vs_ablation"] = t_test_json(tt);
  const std::string p_str = std::isfinite(tt.p_two_sided) ? fmt_sci(tt.p_two_sided, 2) : "n/a (n < 2)";
  d.summary.push_back({{"metric", "what the memory adds: " + pr.pair.hybrid + " vs " + pr.pair.ablation +
                                      " (relative BPC improvement, paired t-test p)"},
                       {"paper", "not reported"},
                       {"ours", fmt_mean_sd(hb, 3) + " vs " + fmt_mean_sd(ab, 3) + ": " + fmt_pct(rel, 1) +
                                    " (p = " + p_str + ")"}});
}

void add_pair(Derived& d, const PairResult& pr) {
  const std::vector<double> hb = test_bpc(pr.hybrid), sb = test_bpc(pr.swa), rb = test_bpc(pr.reference);
  for (const auto* set : {&pr.hybrid, &pr.swa, &pr.reference, &pr.ablation})
    for (const auto& r : *set) d.train_seconds += r.train_seconds;
  const PairedTTest tt = paired_t_test(sb, hb);  // positive mean: the hybrid has the lower BPC
  const double rel = (mean_of(sb) - mean_of(hb)) / mean_of(sb);
  double sup = 0;
  for (const auto& r : pr.swa) sup += r.matched_support / pr.swa.size();
  // The hybrid's local width (chunk, or W_loc + chunk - 1 with the sliding local path) is what the
  // window adds the support to (docs/layers.md §3).
  const Run& w0 = pr.swa.front();
  const std::string width =
      std::to_string(w0.window - static_cast<std::int64_t>(std::llround(w0.matched_support)));
  add_model_row(d, pr.pair, pr.hybrid, "local " + width + " + |S ∪ E| ≈ " + fmt_fixed(sup, 1) + " (measured)");
  add_model_row(d, pr.pair, pr.swa,
                "window " + std::to_string(w0.window) + " = local width " + width + " + " + fmt_fixed(sup, 1));
  if (!pr.reference.empty()) add_model_row(d, pr.pair, pr.reference, "full context");
  json pj = {{"hybrid", pr.pair.hybrid}, {"swa", pr.pair.swa}, {"reference", pr.pair.reference},
             {"gate", pr.pair.gate}, {"hybrid_test_bpc", hb}, {"swa_test_bpc", sb},
             {"reference_test_bpc", rb}, {"relative_improvement", rel}, {"paired_t", t_test_json(tt)}};
  add_ablation(d, pr, pj);
  json runs = json::array();
  for (const auto* set : {&pr.hybrid, &pr.swa, &pr.reference, &pr.ablation})
    for (const auto& r : *set) runs.push_back(run_json(r)), add_convergence_row(d, r);
  pj["runs"] = runs;
  d.pairs.push_back(pj);
  add_pair_summary(d, pr.pair, hb, sb, tt, rel);
}

// Every model's runs (each pair's hybrid, window, reference and ablation) in report order.
std::vector<const std::vector<Run>*> model_runs(const Result& res) {
  std::vector<const std::vector<Run>*> out;
  for (const auto& pr : res.pairs)
    for (const auto* set : {&pr.hybrid, &pr.swa, &pr.reference, &pr.ablation})
      if (!set->empty() && !set->front().position_bpc.empty()) out.push_back(set);
  return out;
}

// Mean over seeds of the test BPC at each position within the chunk.
std::vector<double> mean_position_bpc(const std::vector<Run>& runs) {
  std::vector<double> m(runs.front().position_bpc.size(), 0.0);
  for (const auto& r : runs)
    for (std::size_t i = 0; i < m.size() && i < r.position_bpc.size(); ++i)
      m[i] += r.position_bpc[i] / static_cast<double>(runs.size());
  return m;
}

// Positions within the chunk in groups that double: 0, 1, 2–3, 4–7, ..., up to chunk - 1.
std::vector<std::pair<std::size_t, std::size_t>> position_groups(std::size_t period) {
  std::vector<std::pair<std::size_t, std::size_t>> g;
  for (std::size_t lo = 0; lo < period; lo = lo == 0 ? 1 : 2 * lo) g.emplace_back(lo, std::min(period, lo == 0 ? 1 : 2 * lo) - 1);
  return g;
}

// Test BPC by position within the chunk (mean over seeds; every position holds the same number of
// targets when the sequence is a multiple of the chunk): the chunk-local reset shows at position 0.
void add_position_table(Derived& d, const Result& res) {
  const auto sets = model_runs(res);
  if (sets.empty()) return;
  const auto groups = position_groups(sets.front()->front().position_bpc.size());
  std::vector<std::string> cols = {"model"};
  for (const auto& [lo, hi] : groups)
    cols.push_back(lo == hi ? std::to_string(lo) : std::to_string(lo) + "–" + std::to_string(hi));
  cols.push_back("all");
  d.position_table = Table(cols);
  for (const auto* runs : sets) {
    const std::vector<double> m = mean_position_bpc(*runs);
    std::vector<std::string> row = {runs->front().preset};
    for (const auto& [lo, hi] : groups) {
      double sum = 0;
      for (std::size_t i = lo; i <= hi && i < m.size(); ++i) sum += m[i];
      row.push_back(fmt_fixed(sum / static_cast<double>(hi - lo + 1), 3));
    }
    row.push_back(fmt_mean_sd(test_bpc(*runs), 3));
    d.position_table.add_row(row);
  }
}

Derived derive(const Result& res) {
  Derived d;
  for (const auto& pr : res.pairs) add_pair(d, pr);
  add_position_table(d, res);
  const PairResult& first = res.pairs.front();
  if (!first.reference.empty())
    d.summary.push_back({{"metric", "test BPC, full softmax reference " + first.pair.reference},
                         {"paper", "not reported"},
                         {"ours", fmt_mean_sd(test_bpc(first.reference), 3)}});
  std::vector<double> g;
  for (const auto& r : first.hybrid)
    if (!r.gate_curve.empty()) g.push_back(r.gate_curve.back().second);
  d.summary.push_back({{"metric", "hybrid gate memory / local split at the end of training"},
                       {"paper", "not reported (gate trains slowly at 10M)"},
                       {"ours", g.empty() ? "n/a"
                                          : fmt_fixed(mean_of(g), 3) + " / " + fmt_fixed(1 - mean_of(g), 3)}});
  d.summary.push_back(
      {{"metric", "largest validation improvement over the last 20 % of training (any run)"},
       {"paper", "not reported"},
       {"ours", std::isfinite(d.worst_last_fifth) ? fmt_pct(d.worst_last_fifth, 2) : "n/a"}});
  return d;
}

// Validation BPC curves of every model and seed, and the hybrids' gate share during training.
std::vector<PlotResult> plots(const Result& res, const ExperimentOptions& o) {
  LinePlot vc;
  vc.title = "E5 validation BPC (" + res.corpus_label + ")";
  vc.xlabel = "step";
  vc.ylabel = "validation BPC";
  LinePlot gc;
  gc.title = "E5 hybrid gate: memory share during training";
  gc.xlabel = "step";
  gc.ylabel = "mean gate g (memory share)";
  gc.ymin = 0;
  gc.ymax = 1;
  const auto series = [](const std::string& title, const std::vector<std::pair<double, double>>& c) {
    Series s;
    s.title = title;
    for (const auto& [x, y] : c) s.x.push_back(x), s.y.push_back(y);
    return s;
  };
  for (const auto& pr : res.pairs)
    for (const auto* set : {&pr.hybrid, &pr.swa, &pr.reference, &pr.ablation})
      for (const auto& r : *set) {
        const std::string title = r.preset + " seed " + std::to_string(r.seed);
        if (!r.valid_curve.empty()) vc.series.push_back(series(title, r.valid_curve));
        if (!r.gate_curve.empty()) gc.series.push_back(series(title, r.gate_curve));
      }
  LinePlot pc;
  pc.title = "E5 test BPC by position within the chunk (mean over seeds)";
  pc.xlabel = "query position t mod chunk";
  pc.ylabel = "test BPC";
  for (const auto* runs : model_runs(res)) {
    const std::vector<double> m = mean_position_bpc(*runs);
    Series s;
    s.title = runs->front().preset;
    for (std::size_t i = 0; i < m.size(); ++i) s.x.push_back(static_cast<double>(i)), s.y.push_back(m[i]);
    pc.series.push_back(s);
  }
  std::vector<PlotResult> out = {detail::maybe_line_plot(o, "E5_valid_bpc", vc), detail::maybe_line_plot(o, "E5_gate", gc)};
  if (!pc.series.empty()) out.push_back(detail::maybe_line_plot(o, "E5_position_bpc", pc));
  return out;
}

std::string markdown(const Result& res, const Derived& d, const std::vector<PlotResult>& plot_list) {
  const Settings& p = res.settings;
  std::ostringstream md;
  md << "# E5 — character LM: hybrid SV attention vs state-matched sliding window\n\n";
  md << "Preset `" << res.preset << "`, seeds " << res.seeds.front() << "–" << res.seeds.back()
     << ", run time " << detail::duration(res.measure_seconds) << " (training "
     << detail::duration(d.train_seconds) << ") on "
     << res.machine.value("cpu", std::string("unknown CPU")) << " (1 thread per run, "
     << (p.device == "cpu" ? std::max(1, p.workers) : 1) << " run(s) side by side).\n\n";
  md << "Scale: " << scale_text(res) << ". " << p.note << ".\n\n";
  md << "Each seed trains the hybrid first; its sliding-window partner uses window = the hybrid's "
        "local width (its chunk; W_loc + chunk - 1 with the sliding local path) + its measured "
        "average support (last quarter of its training log), so both carry the "
        "same attention state per head. Same seed = same initialisation seed and the same training "
        "batches for every model. Test BPC over the test split (5 % at the end of the corpus).\n\n";
  md << "## Summary (ours beside the paper)\n\n| metric | paper | ours |\n| --- | --- | --- |\n";
  for (const auto& s : d.summary)
    md << "| " << s["metric"].get<std::string>() << " | " << s["paper"].get<std::string>() << " | "
       << s["ours"].get<std::string>() << " |\n";
  md << "\n## Test BPC\n\n" << d.main_table.markdown() << "\n";
  md << "## Convergence, gate and support per run\n\nLast 20 % improvement: (validation BPC at the "
        "first evaluation at or after 80 % of the steps − final validation BPC) / the former; the "
        "gate's memory share and |S ∪ E| per head are each layer's values at the last training "
        "record.\n\n"
     << d.conv_table.markdown() << "\n";
  if (d.position_table.rows() > 0)
    md << "## Test BPC by position within the chunk\n\nMean over seeds of the test BPC of the queries "
          "at positions t mod chunk (groups of positions; the chunk-local softmax restarts at 0, "
          "where a query sees only itself locally).\n\n"
       << d.position_table.markdown() << "\n";
  md << "Run directories (checkpoints, metrics.jsonl with the gate's memory/local split per layer): `"
     << res.runs_dir << "`.\n\n";
  md << detail::plots_markdown(plot_list);
  return md.str();
}

}  // namespace

json Result::to_json() const {
  json pj = json::array();
  for (const auto& pr : pairs)
    pj.push_back({{"pair", pr.pair}, {"hybrid", runs_json(pr.hybrid)}, {"swa", runs_json(pr.swa)},
                  {"reference", runs_json(pr.reference)}, {"ablation", runs_json(pr.ablation)}});
  return {{"preset", preset},     {"seed", seed},         {"settings", settings},
          {"seeds", seeds},       {"data", corpus_label}, {"runs_dir", runs_dir},
          {"pairs", pj},          {"machine", machine},   {"created", created},
          {"measure_seconds", measure_seconds}};
}

Result Result::from_json(const json& j) {
  Result r;
  r.preset = field<std::string>(j, "preset");
  r.seed = field<std::uint64_t>(j, "seed");
  r.settings = field<Settings>(j, "settings");
  r.seeds = field<std::vector<std::uint64_t>>(j, "seeds");
  r.corpus_label = field<std::string>(j, "data");
  r.runs_dir = field<std::string>(j, "runs_dir");
  for (const auto& x : field<json>(j, "pairs")) {
    PairResult pr;
    pr.pair = field<Pair>(x, "pair");
    pr.hybrid = runs_from_json(x, "hybrid");
    pr.swa = runs_from_json(x, "swa");
    pr.reference = runs_from_json(x, "reference");
    if (x.contains("ablation")) pr.ablation = runs_from_json(x, "ablation");
    if (pr.hybrid.empty() || pr.swa.size() != pr.hybrid.size())
      throw FormatError("E5 result: a pair needs one hybrid and one window run per seed");
    r.pairs.push_back(std::move(pr));
  }
  if (r.pairs.empty() || r.seeds.empty()) throw FormatError("E5 result: no pairs or no seeds");
  r.machine = field<json>(j, "machine");
  r.created = field<std::string>(j, "created");
  r.measure_seconds = field<double>(j, "measure_seconds");
  return r;
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

Result measure(const ExperimentOptions& o) {
  o.validate();
  const Stopwatch total;
  Settings p = detail::with_overrides(e5_preset(o.preset), "E5", o);
  if (o.trials > 0) p.seeds = o.trials;
  if (o.steps > 0) {
    // Keep the preset's proportions: warm-up and validation interval scale with the length.
    const double f = static_cast<double>(o.steps) / static_cast<double>(p.steps);
    p.warmup = std::max<std::int64_t>(1, std::llround(static_cast<double>(p.warmup) * f));
    p.eval_every = std::max<std::int64_t>(1, std::llround(static_cast<double>(p.eval_every) * f));
    p.steps = o.steps;
    p.note += "; steps overridden to " + std::to_string(o.steps) + " (--steps)";
  }
  lm::set_threads(1);
  ensure_dir(o.out_dir);
  Result res;
  res.preset = o.preset;
  res.seed = o.seed;
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
      jobs.emplace_back([&p, &o, &pr, &res, si] {
        const Pair& q = pr.pair;
        const std::uint64_t s = res.seeds[si];
        pr.hybrid[si] = train_and_test(p, q.hybrid, q.gate, s, "", o);
        pr.swa[si] = train_and_test(p, q.swa, q.gate, s, pr.hybrid[si].dir, o);
        if (!q.reference.empty()) pr.reference[si] = train_and_test(p, q.reference, q.gate, s, "", o);
        if (!q.ablation.empty()) pr.ablation[si] = train_and_test(p, q.ablation, q.gate, s, "", o);
      });
    }
  }
  detail::run_jobs(jobs, p.device == "cpu" ? p.workers : 1);
  res.corpus_label = lm::Corpus::load({p.corpus, "", o.data_dir}).label();
  res.settings = p;
  res.machine = detail::machine_info();
  res.created = utc_now();
  res.measure_seconds = total.seconds();
  return res;
}

ExperimentResult render(const Result& res, const ExperimentOptions& o) {
  ensure_dir(o.out_dir);
  const Derived d = derive(res);
  const std::vector<PlotResult> plot_list = plots(res, o);
  const Settings& p = res.settings;
  json j;
  j["experiment"] = "E5";
  j["title"] = kInfo.title;
  j["preset"] = res.preset;
  j["seed"] = res.seed;
  j["machine"] = res.machine;
  j["created"] = res.created;
  j["data"] = res.corpus_label + " (split 90/5/5 in order)";
  j["scale"] = scale_text(res);
  j["settings"] = {{"steps", p.steps}, {"batch", p.batch}, {"seq", p.seq}, {"warmup", p.warmup},
                   {"eval_every", p.eval_every}, {"eval_windows", p.eval_windows},
                   {"test_windows", p.test_windows}, {"seeds", res.seeds}, {"note", p.note}};
  j["pairs"] = d.pairs;
  j["tables"] = {{"test_bpc", d.main_table.json()}, {"convergence", d.conv_table.json()},
                 {"position_bpc", d.position_table.json()}};
  j["summary"] = d.summary;
  j["train_seconds_total"] = d.train_seconds;
  j["plots"] = detail::plots_json(plot_list);
  j["runtime_seconds"] = res.measure_seconds;
  j["result"] = res.to_json();  // render(Result::from_json(E5.json["result"])) writes this report
  detail::write_outputs(o, "E5", j, markdown(res, d, plot_list));
  return ExperimentResult::from_json(j);
}

ExperimentResult run(const ExperimentOptions& o) { return render(measure(o), o); }

}  // namespace svattn::experiments::e5_char_lm
