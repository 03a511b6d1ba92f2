// E5's typed result as E5.json["result"]: written by to_json, read back only by `--render`.
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

}  // namespace

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

double Run::last_fifth_improvement() const {
  if (valid_curve.size() < 2 || steps <= 0) return std::nan("");
  const double from = 0.8 * static_cast<double>(steps);
  for (const auto& [step, bpc] : valid_curve)
    if (step >= from && step < valid_curve.back().first) return (bpc - valid_curve.back().second) / bpc;
  return std::nan("");
}

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

}  // namespace svattn::experiments::e5_char_lm
