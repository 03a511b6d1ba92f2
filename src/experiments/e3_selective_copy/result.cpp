// E3's typed result as E3.json["result"]: written by to_json, read back only by `--render`.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "common.h"
#include "internal.h"
#include "svattn/errors.h"
#include "experiments/framework/statistics.h"
#include "svattn/lm/trainer.h"
#include "svattn/torch/model.h"

namespace svattn::experiments::e3_selective_copy {
namespace {

using nlohmann::json;
using detail::number_or_null;

template <typename T>
T field(const json& j, const char* key) {
  return detail::json_field<T>(j, key, "E3 result");
}

double number_or_nan(const json& j, const char* key) {
  return detail::number_or_nan(j, key, "E3 result");
}

json eval_point_json(const EvalPoint& e) {
  return {{"factor", e.factor},
          {"length", e.length},
          {"recall", e.recall},
          {"outputs", e.outputs},
          {"recall_per_output", e.recall_per_output},
          {"support", e.support},
          {"distinct_support", e.distinct_support},
          {"duplicate_alpha_spread", number_or_null(e.duplicate_alpha_spread)},
          {"duplicate_support_tokens", e.duplicate_support_tokens},
          {"gate_per_layer", e.gate_per_layer},
          {"gate_mean", number_or_null(e.gate_mean)},
          {"partition_agreement", number_or_null(e.partition_agreement)},
          {"coefficient_error", number_or_null(e.coefficient_error)},
          {"seconds", e.seconds}};
}

EvalPoint eval_point_from_json(const json& j) {
  using Table2 = std::vector<std::vector<double>>;
  EvalPoint e;
  e.factor = field<int>(j, "factor");
  e.length = field<int>(j, "length");
  e.recall = field<double>(j, "recall");
  e.outputs = field<long>(j, "outputs");
  e.recall_per_output = field<std::vector<double>>(j, "recall_per_output");
  e.support = field<Table2>(j, "support");
  e.distinct_support = field<Table2>(j, "distinct_support");
  e.duplicate_alpha_spread = number_or_nan(j, "duplicate_alpha_spread");
  e.duplicate_support_tokens = field<long>(j, "duplicate_support_tokens");
  e.gate_per_layer = field<std::vector<double>>(j, "gate_per_layer");
  e.gate_mean = number_or_nan(j, "gate_mean");
  e.partition_agreement = number_or_nan(j, "partition_agreement");
  e.coefficient_error = number_or_nan(j, "coefficient_error");
  e.seconds = field<double>(j, "seconds");
  return e;
}

json eval_points_json(const std::vector<EvalPoint>& v) {
  return detail::json_array(v, eval_point_json);
}

std::vector<EvalPoint> eval_points_from_json(const json& j, const char* key) {
  return detail::json_array_field(j, key, "E3 result", eval_point_from_json);
}

json method_result_json(const MethodResult& r) {
  return {{"method", r.method},
          {"heads", r.heads},
          {"window", r.window},
          {"parameters", r.parameters},
          {"train_seconds", r.train_seconds},
          {"loss_curve", r.loss_curve},
          {"grad_norm_curve", r.grad_norm_curve},
          {"final_train_loss", r.final_train_loss},
          {"eval", eval_points_json(r.eval)},
          {"eval_exact", eval_points_json(r.eval_exact)},
          {"eval_exact_seconds", r.eval_exact_seconds},
          {"sigma", r.sigma},
          {"state_per_layer", r.state_per_layer},
          {"reused", r.reused},
          {"outputs", detail::json_array(r.outputs, [](const OutputDiagnosis& d) { return d.to_json(); })}};
}

MethodResult method_result_from_json(const json& j) {
  MethodResult r;
  r.method = field<std::string>(j, "method");
  try {
    method_named(r.method);
  } catch (const InvalidArgument&) {
    throw FormatError("E3 result: unknown method `" + r.method + "`");
  }
  r.heads = field<std::int64_t>(j, "heads");
  r.window = field<std::int64_t>(j, "window");
  r.parameters = field<std::int64_t>(j, "parameters");
  r.train_seconds = field<double>(j, "train_seconds");
  r.loss_curve = field<std::vector<std::pair<int, double>>>(j, "loss_curve");
  r.grad_norm_curve = field<std::vector<double>>(j, "grad_norm_curve");
  if (r.grad_norm_curve.size() != r.loss_curve.size())
    throw FormatError("E3 result: `grad_norm_curve` and `loss_curve` differ in length");
  r.final_train_loss = field<double>(j, "final_train_loss");
  r.eval = eval_points_from_json(j, "eval");
  if (r.eval.empty()) throw FormatError("E3 result: method " + r.method + " has no `eval` points");
  r.eval_exact = eval_points_from_json(j, "eval_exact");
  r.eval_exact_seconds = field<double>(j, "eval_exact_seconds");
  r.sigma = field<std::vector<std::vector<double>>>(j, "sigma");
  r.state_per_layer = field<double>(j, "state_per_layer");
  r.reused = field<bool>(j, "reused");
  if (j.contains("outputs"))  // absent in results written before the per-output diagnosis
    r.outputs = detail::json_array_field(j, "outputs", "E3 result", OutputDiagnosis::from_json);
  return r;
}

json seed_runs_json(const SeedRuns& r) {
  return {{"seed", r.seed},
          {"methods", detail::json_array(r.results, method_result_json)},
          {"support", number_or_null(r.support)},
          {"hybrid_state", number_or_null(r.hybrid_state)},
          {"window", r.window},
          {"longest", r.longest},
          {"recurrent_covers", r.recurrent_covers}};
}

SeedRuns seed_runs_from_json(const json& j) {
  SeedRuns r;
  r.seed = field<std::uint64_t>(j, "seed");
  r.results = detail::json_array_field(j, "methods", "E3 result", method_result_from_json);
  if (r.results.empty()) throw FormatError("E3 result: a seed without methods");
  r.support = number_or_nan(j, "support");
  r.hybrid_state = number_or_nan(j, "hybrid_state");
  r.window = field<std::int64_t>(j, "window");
  r.longest = field<std::int64_t>(j, "longest");
  r.recurrent_covers = field<bool>(j, "recurrent_covers");
  return r;
}

}  // namespace

const MethodResult* SeedRuns::find(const std::string& method) const {
  for (const auto& r : results)
    if (r.method == method) return &r;
  return nullptr;
}

json Result::to_json() const {
  return {{"preset", preset},
          {"overrides", overrides},
          {"settings", settings},
          {"runs", detail::json_array(runs, seed_runs_json)},
          {"machine", machine},
          {"created", created},
          {"measure_seconds", measure_seconds}};
}

Result Result::from_json(const json& j) {
  Result r;
  r.preset = field<std::string>(j, "preset");
  r.overrides = field<std::string>(j, "overrides");
  r.settings = field<Settings>(j, "settings");
  r.runs = detail::json_array_field(j, "runs", "E3 result", seed_runs_from_json);
  if (r.runs.empty()) throw FormatError("E3 result: no runs");
  r.machine = field<json>(j, "machine");
  r.created = field<std::string>(j, "created");
  r.measure_seconds = field<double>(j, "measure_seconds");
  return r;
}

}  // namespace svattn::experiments::e3_selective_copy
