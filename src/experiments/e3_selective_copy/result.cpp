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
#include "experiments/framework/json_fields.h"
#include "experiments/framework/statistics.h"
#include "svattn/lm/trainer.h"
#include "svattn/torch/model.h"

namespace svattn::experiments::e3_selective_copy {
namespace {

using nlohmann::json;
constexpr const char* kWhat = "E3 result";

/// One output position's diagnosis (E3's hybrid with chunk 1).
const JsonFields<OutputDiagnosis>& output_fields() {
  using D = OutputDiagnosis;
  static const JsonFields<D> table = {
      json_member<D>("output", &D::output),
      json_member<D>("recall", &D::recall),
      json_member<D>("predicted_symbol_share", &D::predicted_symbol_share),
      json_member<D>("support_per_layer", &D::support_per_layer),
      json_member<D>("gate_per_layer", &D::gate_per_layer)};
  return table;
}

/// One method's recall at one padding factor; NaN fields are null.
const JsonFields<EvalPoint>& eval_point_fields() {
  using E = EvalPoint;
  static const JsonFields<E> table = {
      json_member<E>("factor", &E::factor),
      json_member<E>("length", &E::length),
      json_member<E>("recall", &E::recall),
      json_member<E>("outputs", &E::outputs),
      json_member<E>("recall_per_output", &E::recall_per_output),
      json_member<E>("support", &E::support),
      json_member<E>("distinct_support", &E::distinct_support),
      json_number_or_nan<E>("duplicate_alpha_spread", &E::duplicate_alpha_spread),
      json_member<E>("duplicate_support_tokens", &E::duplicate_support_tokens),
      json_member<E>("gate_per_layer", &E::gate_per_layer),
      json_number_or_nan<E>("gate_mean", &E::gate_mean),
      json_number_or_nan<E>("partition_agreement", &E::partition_agreement),
      json_number_or_nan<E>("coefficient_error", &E::coefficient_error),
      json_member<E>("seconds", &E::seconds)};
  return table;
}

const JsonFields<MethodResult>& method_result_fields() {
  using M = MethodResult;
  static const JsonFields<M> table = {
      json_checked(json_member<M>("method", &M::method),
                   [](const M& r) {
                     try {
                       method_named(r.method);
                     } catch (const InvalidArgument&) {
                       throw FormatError("E3 result: unknown method `" + r.method + "`");
                     }
                   }),
      json_member<M>("heads", &M::heads),
      json_member<M>("window", &M::window),
      json_member<M>("parameters", &M::parameters),
      json_member<M>("train_seconds", &M::train_seconds),
      json_member<M>("loss_curve", &M::loss_curve),
      json_checked(json_member<M>("grad_norm_curve", &M::grad_norm_curve),
                   [](const M& r) {
                     if (r.grad_norm_curve.size() != r.loss_curve.size())
                       throw FormatError("E3 result: `grad_norm_curve` and `loss_curve` differ in length");
                   }),
      json_member<M>("final_train_loss", &M::final_train_loss),
      json_checked(json_struct_array<M>("eval", &M::eval, eval_point_fields, kWhat),
                   [](const M& r) {
                     if (r.eval.empty())
                       throw FormatError("E3 result: method " + r.method + " has no `eval` points");
                   }),
      json_struct_array<M>("eval_exact", &M::eval_exact, eval_point_fields, kWhat),
      json_member<M>("eval_exact_seconds", &M::eval_exact_seconds),
      json_member<M>("sigma", &M::sigma),
      json_member<M>("state_per_layer", &M::state_per_layer),
      json_member<M>("reused", &M::reused),
      // absent in results written before the per-output diagnosis
      json_optional(json_struct_array<M>("outputs", &M::outputs, output_fields, kWhat))};
  return table;
}

const JsonFields<SeedRuns>& seed_runs_fields() {
  using R = SeedRuns;
  static const JsonFields<R> table = {
      json_member<R>("seed", &R::seed),
      json_checked(json_struct_array<R>("methods", &R::results, method_result_fields, kWhat),
                   [](const R& r) {
                     if (r.results.empty()) throw FormatError("E3 result: a seed without methods");
                   }),
      json_number_or_nan<R>("support", &R::support),
      json_number_or_nan<R>("hybrid_state", &R::hybrid_state),
      json_member<R>("window", &R::window),
      json_member<R>("longest", &R::longest),
      json_member<R>("recurrent_covers", &R::recurrent_covers)};
  return table;
}

const JsonFields<Result>& result_fields() {
  static const JsonFields<Result> table = {
      json_member<Result>("preset", &Result::preset),
      json_member<Result>("overrides", &Result::overrides),
      json_member<Result>("settings", &Result::settings),
      json_checked(json_struct_array<Result>("runs", &Result::runs, seed_runs_fields, kWhat),
                   [](const Result& r) {
                     if (r.runs.empty()) throw FormatError("E3 result: no runs");
                   }),
      json_member<Result>("machine", &Result::machine),
      json_member<Result>("created", &Result::created),
      json_member<Result>("measure_seconds", &Result::measure_seconds)};
  return table;
}

}  // namespace

json OutputDiagnosis::to_json() const { return write_fields(output_fields(), *this); }

OutputDiagnosis OutputDiagnosis::from_json(const json& j) {
  return read_fields(output_fields(), j, kWhat);
}

const MethodResult* SeedRuns::find(const std::string& method) const {
  for (const auto& r : results)
    if (r.method == method) return &r;
  return nullptr;
}

json Result::to_json() const { return write_fields(result_fields(), *this); }

Result Result::from_json(const json& j) { return read_fields(result_fields(), j, kWhat); }

}  // namespace svattn::experiments::e3_selective_copy
