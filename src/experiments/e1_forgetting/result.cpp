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

template <typename T>
T field(const nlohmann::json& j, const char* key, const char* what = "E1 result") {
  return detail::json_field<T>(j, key, what);
}

/// A double; null reads as NaN (nlohmann writes a non-finite double as null).
double number(const nlohmann::json& j, const char* key, const char* what = "E1 result") {
  return detail::number_or_nan(j, key, what);
}

/// A max |Δ| of a Comparison: null reads as +infinity. deviations() counts a NaN difference as
/// infinite (e.g. the readouts of a memory emptied by a record deletion), so a deviation is never
/// NaN, and JSON writes infinity as null.
double deviation(const nlohmann::json& j, const char* key, const char* what) {
  const nlohmann::json v = field<nlohmann::json>(j, key, what);
  return v.is_null() ? std::numeric_limits<double>::infinity() : number(j, key, what);
}

nlohmann::json stream_result_json(const StreamResult& s) {
  const nlohmann::json cs =
      detail::json_array(s.comparisons, [](const Comparison& c) { return c.to_json(); });
  return {{"name", s.name},   {"description", s.description}, {"status", s.status},
          {"pending_reason", s.pending_reason}, {"n", s.n}, {"d", s.d}, {"trials", s.trials},
          {"sigma_median", s.sigma_median}, {"C", s.C}, {"comparisons", cs}, {"seconds", s.seconds}};
}

StreamResult stream_result_from_json(const nlohmann::json& j) {
  StreamResult s;
  s.name = field<std::string>(j, "name");
  s.description = field<std::string>(j, "description");
  s.status = field<std::string>(j, "status");
  if (s.status != "ok" && s.status != "pending")
    throw FormatError("E1 result: field `status` of stream '" + s.name + "' is neither ok nor pending");
  s.pending_reason = field<std::string>(j, "pending_reason");
  s.n = field<int>(j, "n");
  s.d = field<int>(j, "d");
  s.trials = field<int>(j, "trials");
  s.sigma_median = number(j, "sigma_median");
  s.C = number(j, "C");
  s.comparisons = detail::json_array_field(j, "comparisons", "E1 result", Comparison::from_json);
  s.seconds = number(j, "seconds");
  return s;
}

}  // namespace

nlohmann::json Comparison::to_json() const {
  return {{"stream", stream},
          {"trial", trial},
          {"scenario", scenario},
          {"removed", removed},
          {"partition_equal", partition_equal},
          {"hash_equal", hash_equal},
          {"max_abs_dalpha", dalpha},
          {"max_abs_ddecision", ddecision},
          {"max_abs_dreadout", dreadout},
          {"decay_zero", {{"max_abs_dalpha", decay_dalpha},
                          {"max_abs_ddecision", decay_ddecision},
                          {"max_abs_dreadout", decay_dreadout}}},
          {"decay_mult", {{"max_abs_dalpha", mult_dalpha},
                          {"max_abs_ddecision", mult_ddecision},
                          {"max_abs_dreadout", mult_dreadout}}},
          {"removed_alpha_mass", removed_mass},
          {"events", events},
          {"repairs", repairs},
          {"batch_fallbacks", fallbacks},
          {"status", status},
          {"remove_seconds", remove_seconds},
          {"retrain_seconds", retrain_seconds},
          {"repro", repro}};
}

Comparison Comparison::from_json(const nlohmann::json& j) {
  const char* what = "E1 comparison";
  Comparison c;
  c.stream = field<std::string>(j, "stream", what);
  c.trial = field<int>(j, "trial", what);
  c.scenario = field<std::string>(j, "scenario", what);
  c.removed = field<int>(j, "removed", what);
  c.partition_equal = field<bool>(j, "partition_equal", what);
  c.hash_equal = field<bool>(j, "hash_equal", what);
  c.dalpha = deviation(j, "max_abs_dalpha", what);
  c.ddecision = deviation(j, "max_abs_ddecision", what);
  c.dreadout = deviation(j, "max_abs_dreadout", what);
  const nlohmann::json zero = field<nlohmann::json>(j, "decay_zero", what);
  c.decay_dalpha = deviation(zero, "max_abs_dalpha", "E1 comparison decay_zero");
  c.decay_ddecision = deviation(zero, "max_abs_ddecision", "E1 comparison decay_zero");
  c.decay_dreadout = deviation(zero, "max_abs_dreadout", "E1 comparison decay_zero");
  const nlohmann::json mult = field<nlohmann::json>(j, "decay_mult", what);
  c.mult_dalpha = deviation(mult, "max_abs_dalpha", "E1 comparison decay_mult");
  c.mult_ddecision = deviation(mult, "max_abs_ddecision", "E1 comparison decay_mult");
  c.mult_dreadout = deviation(mult, "max_abs_dreadout", "E1 comparison decay_mult");
  c.removed_mass = number(j, "removed_alpha_mass", what);
  c.events = field<long>(j, "events", what);
  c.repairs = field<long>(j, "repairs", what);
  c.fallbacks = field<long>(j, "batch_fallbacks", what);
  c.status = field<std::string>(j, "status", what);
  c.remove_seconds = number(j, "remove_seconds", what);
  c.retrain_seconds = number(j, "retrain_seconds", what);
  c.repro = field<std::string>(j, "repro", what);
  return c;
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
          json_custom<Result>(
              "streams", [](const Result& r) { return detail::json_array(r.streams, stream_result_json); },
              [](const nlohmann::json& v, Result& r) {
                if (!v.is_array()) throw FormatError("E1 result: field `streams` has the wrong type");
                for (const auto& x : v) r.streams.push_back(stream_result_from_json(x));
              })};
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
