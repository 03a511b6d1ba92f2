// E1's typed result as E1.json["result"]: written by to_json, read back only by `--render`.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "common.h"
#include "svattn/batch_solver.h"
#include "svattn/errors.h"
#include "experiments/e1_forgetting/e1_forgetting.h"
#include "experiments/registry.h"
#include "experiments/icu.h"
#include "experiments/report.h"
#include "experiments/streams.h"
#include "svattn/io.h"
#include "svattn/memory.h"
#include "svattn/readout.h"
#include "internal.h"
#include "experiments/framework/json_fields.h"

namespace svattn::experiments::e1_forgetting {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

/// A max |Δ| of a Comparison: null reads as +infinity. deviations() counts a NaN difference as
/// infinite (e.g. the readouts of a memory emptied by a record deletion), so a deviation is never
/// NaN, and JSON writes infinity as null.
JsonField<Comparison> deviation(const char* name, double Comparison::*member) {
  return json_number_or_null<Comparison>(name, member, kInfinity);
}

/// A Comparison's keys (docs/experiments.md, E1): the three deviations, at top level and for both
/// decay schemes under `decay_zero` and `decay_mult`.
const JsonFields<Comparison>& comparison_fields() {
  using C = Comparison;
  static const JsonFields<C> table = {
      json_member<C>("stream", &C::stream),
      json_member<C>("trial", &C::trial),
      json_member<C>("scenario", &C::scenario),
      json_member<C>("removed", &C::removed),
      json_member<C>("partition_equal", &C::partition_equal),
      json_member<C>("hash_equal", &C::hash_equal),
      deviation("max_abs_dalpha", &C::dalpha),
      deviation("max_abs_ddecision", &C::ddecision),
      deviation("max_abs_dreadout", &C::dreadout),
      json_group<C>("decay_zero",
                    {deviation("max_abs_dalpha", &C::decay_dalpha),
                     deviation("max_abs_ddecision", &C::decay_ddecision),
                     deviation("max_abs_dreadout", &C::decay_dreadout)},
                    "E1 comparison decay_zero"),
      json_group<C>("decay_mult",
                    {deviation("max_abs_dalpha", &C::mult_dalpha),
                     deviation("max_abs_ddecision", &C::mult_ddecision),
                     deviation("max_abs_dreadout", &C::mult_dreadout)},
                    "E1 comparison decay_mult"),
      json_number_or_nan<C>("removed_alpha_mass", &C::removed_mass),
      json_member<C>("events", &C::events),
      json_member<C>("repairs", &C::repairs),
      json_member<C>("batch_fallbacks", &C::fallbacks),
      json_member<C>("status", &C::status),
      json_number_or_nan<C>("remove_seconds", &C::remove_seconds),
      json_number_or_nan<C>("retrain_seconds", &C::retrain_seconds),
      json_member<C>("repro", &C::repro)};
  return table;
}

const JsonFields<StreamResult>& stream_fields() {
  using T = StreamResult;
  static const JsonFields<T> table = {
      json_member<T>("name", &T::name),
      json_member<T>("description", &T::description),
      json_checked(json_member<T>("status", &T::status),
                   [](const T& s) {
                     if (s.status != "ok" && s.status != "pending")
                       throw FormatError("E1 result: field `status` of stream '" + s.name +
                                         "' is neither ok nor pending");
                   }),
      json_member<T>("pending_reason", &T::pending_reason),
      json_member<T>("n", &T::n),
      json_member<T>("d", &T::d),
      json_member<T>("trials", &T::trials),
      json_number_or_nan<T>("sigma_median", &T::sigma_median),
      json_number_or_nan<T>("C", &T::C),
      json_struct_array<T>("comparisons", &T::comparisons, comparison_fields, "E1 comparison"),
      json_number_or_nan<T>("seconds", &T::seconds)};
  return table;
}

}  // namespace

nlohmann::json Comparison::to_json() const { return write_fields(comparison_fields(), *this); }

Comparison Comparison::from_json(const nlohmann::json& j) {
  return read_fields(comparison_fields(), j, "E1 comparison");
}

const JsonFields<Result>& result_fields() {
  static const JsonFields<Result> table =
      run_header_fields<Result>() +
      JsonFields<Result>{
          json_member<Result>("settings", &Result::settings),
          json_member<Result>("trials", &Result::trials),
          json_member<Result>("selected_streams", &Result::selected_streams),
          json_member<Result>("learned_keys", &Result::learned_keys),
          json_member<Result>("data_dir", &Result::data_dir),
          json_member<Result>("data_dir_source", &Result::data_dir_source),
          json_struct_array<Result>("streams", &Result::streams, stream_fields, "E1 result")};
  return table;
}

nlohmann::json Result::to_json() const { return write_fields(result_fields(), *this); }

Result Result::from_json(const nlohmann::json& j) {
  Result r = read_fields(result_fields(), j, "E1 result");
  bool same = r.streams.size() == r.selected_streams.size();
  for (std::size_t i = 0; same && i < r.streams.size(); ++i)
    same = r.streams[i].name == r.selected_streams[i];
  if (!same)
    throw FormatError("E1 result: field `streams` has not one entry per selected stream, in order");
  if (!r.machine.is_object() || !r.machine.contains("cpu") || !r.machine["cpu"].is_string())
    throw FormatError("E1 result: field `machine` lacks the string `cpu`");
  return r;
}

}  // namespace svattn::experiments::e1_forgetting
