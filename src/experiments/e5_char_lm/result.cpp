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
#include "experiments/framework/json_fields.h"
#include "experiments/framework/statistics.h"
#include "svattn/lm/position_eval.h"
#include "svattn/lm/trainer.h"

namespace svattn::experiments::e5_char_lm {

using nlohmann::json;

namespace {

constexpr const char* kWhat = "E5 result";

/// A run as E5.json has always written it: optional keys only where they apply (and absent in
/// results written before they existed).
const JsonFields<Run>& run_fields() {
  static const JsonFields<Run> table = {
      json_member<Run>("preset", &Run::preset),
      json_member<Run>("seed", &Run::seed),
      json_member<Run>("run_dir", &Run::dir),
      json_member<Run>("parameters", &Run::parameters),
      json_member<Run>("chunk", &Run::chunk),
      json_member<Run>("test_bpc", &Run::test_bpc),
      json_member<Run>("test_windows", &Run::test_windows),
      json_member<Run>("train_seconds", &Run::train_seconds),
      json_member<Run>("tokens_per_second", &Run::tokens_per_second),
      json_member<Run>("valid_curve", &Run::valid_curve),
      json_optional(json_member<Run>("window", &Run::window), [](const Run& r) { return r.window > 0; }),
      json_optional(json_member<Run>("steps", &Run::steps), [](const Run& r) { return r.steps > 0; }),
      json_optional(json_member<Run>("matched_support", &Run::matched_support),
                    [](const Run& r) { return std::isfinite(r.matched_support); }),
      json_optional(json_member<Run>("gate_memory_share_curve", &Run::gate_curve),
                    [](const Run& r) { return !r.gate_curve.empty(); }),
      json_optional(json_member<Run>("support_curve", &Run::support_curve),
                    [](const Run& r) { return !r.support_curve.empty(); }),
      json_written_only<Run>("last_fifth_valid_improvement",
                             [](const Run& r) { return detail::number_or_null(r.last_fifth_improvement()); }),
      json_optional(json_numbers_or_nan<Run>("layer_gate_memory_share", &Run::layer_gate),
                    [](const Run& r) { return !r.layer_gate.empty(); }),
      json_optional(json_numbers_or_nan<Run>("layer_support", &Run::layer_support),
                    [](const Run& r) { return !r.layer_support.empty(); }),
      json_optional(json_numbers_or_nan<Run>("layer_sigma", &Run::layer_sigma),
                    [](const Run& r) { return !r.layer_sigma.empty(); }),
      json_optional(json_numbers_or_nan<Run>("position_bpc", &Run::position_bpc),
                    [](const Run& r) { return !r.position_bpc.empty(); })};
  return table;
}

const JsonFields<PairResult>& pair_fields() {
  using P = PairResult;
  static const JsonFields<P> table = {
      json_member<P>("pair", &P::pair),
      json_struct_array<P>("hybrid", &P::hybrid, run_fields, kWhat),
      json_struct_array<P>("swa", &P::swa, run_fields, kWhat),
      json_struct_array<P>("reference", &P::reference, run_fields, kWhat),
      json_checked(json_optional(json_struct_array<P>("ablation", &P::ablation, run_fields, kWhat)),
                   [](const P& pr) {
                     if (pr.hybrid.empty() || pr.swa.size() != pr.hybrid.size())
                       throw FormatError("E5 result: a pair needs one hybrid and one window run per seed");
                   })};
  return table;
}

const JsonFields<Result>& result_fields() {
  static const JsonFields<Result> table =
      run_header_fields<Result>() +
      JsonFields<Result>{
          json_member<Result>("settings", &Result::settings),
          json_member<Result>("seeds", &Result::seeds),
          json_member<Result>("data", &Result::corpus_label),
          json_member<Result>("runs_dir", &Result::runs_dir),
          json_checked(json_struct_array<Result>("pairs", &Result::pairs, pair_fields, kWhat),
                       [](const Result& r) {
                         if (r.pairs.empty() || r.seeds.empty())
                           throw FormatError("E5 result: no pairs or no seeds");
                       })};
  return table;
}

}  // namespace

json run_json(const Run& r) { return write_fields(run_fields(), r); }

double Run::last_fifth_improvement() const {
  if (valid_curve.size() < 2 || steps <= 0) return std::nan("");
  const double from = 0.8 * static_cast<double>(steps);
  for (const auto& [step, bpc] : valid_curve)
    if (step >= from && step < valid_curve.back().first) return (bpc - valid_curve.back().second) / bpc;
  return std::nan("");
}

json Result::to_json() const { return write_fields(result_fields(), *this); }

Result Result::from_json(const json& j) { return read_fields(result_fields(), j, kWhat); }

}  // namespace svattn::experiments::e5_char_lm
