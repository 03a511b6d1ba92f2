// E7's typed result as E7.json: written by to_json, read back only by `--render` (from_json).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <map>
#include <set>
#include <sstream>

#include "common.h"
#include "svattn/errors.h"
#include "experiments/e7_applications/tools.h"
#include "experiments/e7_applications/e7_applications.h"
#include "experiments/registry.h"
#include "experiments/icu.h"
#include "experiments/report.h"
#include "experiments/streams.h"
#include "svattn/memory.h"
#include "svattn/readout.h"
#include "svattn/store.h"
#include "internal.h"
#include "experiments/framework/json_fields.h"

namespace svattn::experiments::e7_applications {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

template <typename T>
T field(const json& j, const char* key) {
  return detail::json_field<T>(j, key, "E7 result");
}

/// A measured double; null (NaN or ±infinity when written) reads back as NaN.
double number(const json& j, const char* key) { return detail::number_or_nan(j, key, "E7 result"); }

json auc_json(const AucInterval& a) { return {{"auc", a.auc}, {"lo", a.lo}, {"hi", a.hi}, {"reps", a.reps}}; }

AucInterval auc_from(const json& j) {
  AucInterval a;
  a.auc = number(j, "auc");
  a.lo = number(j, "lo");
  a.hi = number(j, "hi");
  a.reps = field<int>(j, "reps");
  return a;
}

ScoreGroup scores_from(const json& j, const char* key) {
  return ScoreGroup{field<std::vector<std::vector<double>>>(j, key)};
}

json probe_json(const ProbeScores& s) {
  return {{"erased", s.erased.scores}, {"never", s.never.scores}, {"present", s.present.scores}};
}

ProbeScores probe_from(const json& j) {
  return {scores_from(j, "erased"), scores_from(j, "never"), scores_from(j, "present")};
}

json method_json(const RemovalMethod& m) {
  return {{"name", m.name},           {"label", m.label},
          {"exact", m.exact},         {"dalpha", m.dalpha},
          {"ddecision", m.ddecision}, {"dreadout", m.dreadout},
          {"auc_erased_never", auc_json(m.auc_erased_never)},
          {"auc_present_never", auc_json(m.auc_present_never)}};
}

RemovalMethod method_from(const json& j) {
  RemovalMethod m;
  m.name = field<std::string>(j, "name");
  m.label = field<std::string>(j, "label");
  m.exact = field<bool>(j, "exact");
  m.dalpha = number(j, "dalpha");
  m.ddecision = number(j, "ddecision");
  m.dreadout = number(j, "dreadout");
  m.auc_erased_never = auc_from(field<json>(j, "auc_erased_never"));
  m.auc_present_never = auc_from(field<json>(j, "auc_present_never"));
  return m;
}

json erasure_json(const ErasureResult& r) {
  const json methods = detail::json_array(r.methods, method_json);
  return {{"source", r.source}, {"stays_eligible", r.stays_eligible}, {"members", r.members},
          {"erased", r.erased}, {"never_seen", r.never_seen}, {"max_hours", r.max_hours},
          {"tokens_before", r.tokens_before}, {"tokens_after", r.tokens_after}, {"sigma", r.sigma},
          {"C", r.C}, {"margin", r.margin}, {"error", r.error}, {"reserve", r.reserve},
          {"certificates", r.certificates}, {"certificates_hash_equal", r.certificates_hash_equal},
          {"certificates_kkt_ok", r.certificates_kkt_ok}, {"wal_truncated", r.wal_truncated},
          {"first_certificate", r.first_certificate}, {"store_hash_equal", r.store_hash_equal},
          {"sha_erased", r.sha_erased}, {"sha_never", r.sha_never},
          {"scores_bit_identical", r.scores_bit_identical},
          {"max_abs_dscore_vs_never_store", r.max_abs_dscore_vs_never_store},
          {"verify_ok", r.verify_ok}, {"verify_problems", r.verify_problems}, {"scan", r.scan},
          {"auc_before", auc_json(r.auc_before)}, {"erased_before", r.erased_before.scores},
          {"exact_scores", probe_json(r.exact_scores)}, {"decay_scores", probe_json(r.decay_scores)},
          {"methods", methods},
          {"add_seconds", r.add_seconds}, {"forget_seconds_total", r.forget_seconds_total},
          {"never_store_seconds", r.never_store_seconds}, {"seconds", r.seconds}};
}

ErasureResult erasure_from(const json& j) {
  ErasureResult r;
  r.source = field<std::string>(j, "source");
  r.stays_eligible = field<int>(j, "stays_eligible");
  r.members = field<int>(j, "members");
  r.erased = field<int>(j, "erased");
  r.never_seen = field<int>(j, "never_seen");
  r.max_hours = field<int>(j, "max_hours");
  r.tokens_before = field<long>(j, "tokens_before");
  r.tokens_after = field<long>(j, "tokens_after");
  r.sigma = number(j, "sigma");
  r.C = number(j, "C");
  r.margin = field<int>(j, "margin");
  r.error = field<int>(j, "error");
  r.reserve = field<int>(j, "reserve");
  r.certificates = field<int>(j, "certificates");
  r.certificates_hash_equal = field<int>(j, "certificates_hash_equal");
  r.certificates_kkt_ok = field<int>(j, "certificates_kkt_ok");
  r.wal_truncated = field<int>(j, "wal_truncated");
  r.first_certificate = field<json>(j, "first_certificate");
  r.store_hash_equal = field<bool>(j, "store_hash_equal");
  r.sha_erased = field<std::string>(j, "sha_erased");
  r.sha_never = field<std::string>(j, "sha_never");
  r.scores_bit_identical = field<bool>(j, "scores_bit_identical");
  r.max_abs_dscore_vs_never_store = number(j, "max_abs_dscore_vs_never_store");
  r.verify_ok = field<bool>(j, "verify_ok");
  r.verify_problems = field<std::vector<std::string>>(j, "verify_problems");
  r.scan = field<StoreScan>(j, "scan");
  r.auc_before = auc_from(field<json>(j, "auc_before"));
  r.erased_before = scores_from(j, "erased_before");
  r.exact_scores = probe_from(field<json>(j, "exact_scores"));
  r.decay_scores = probe_from(field<json>(j, "decay_scores"));
  r.methods = detail::json_array_field(j, "methods", "E7 result", method_from);
  for (const char* name : {"exact", "never_seen", "decay"}) {
    if (std::none_of(r.methods.begin(), r.methods.end(), [&](const RemovalMethod& m) { return m.name == name; }))
      throw FormatError(std::string("E7 result: field `methods` lacks the method ") + name);
  }
  r.add_seconds = number(j, "add_seconds");
  r.forget_seconds_total = number(j, "forget_seconds_total");
  r.never_store_seconds = number(j, "never_store_seconds");
  r.seconds = number(j, "seconds");
  return r;
}

template <typename Trial>
json trials_json(const std::vector<Trial>& trials) {
  return {{"trials", detail::json_array(trials, [](const Trial& t) { return t.to_json(); })}};
}

template <typename Trial>
std::vector<Trial> trials_from(const json& j) {
  return detail::json_array_field(j, "trials", "E7 result", Trial::from_json);
}

}  // namespace

std::vector<double> ScoreGroup::flat() const {
  std::vector<double> v;
  for (const auto& g : scores) v.insert(v.end(), g.begin(), g.end());
  return v;
}

json ForgetTrial::to_json() const {
  return {{"fact", fact}, {"set_before", set}, {"retrieved_before", retrieved_before},
          {"retrieved_after", retrieved_after}, {"decoded_after", decoded_after},
          {"decoded_same_subject", decoded_same_subject}, {"hash_equal_never_seen", hash_equal},
          {"max_abs_dreadout_vs_never_seen", dreadout_never}, {"max_abs_ripple_other_facts", ripple},
          {"others", others}, {"others_retrieved_before", others_retrieved_before},
          {"others_retrieved_after", others_retrieved_after}, {"others_decode_changed", others_changed},
          {"decay", {{"max_abs_dreadout_vs_never_seen", decay_dreadout_never},
                     {"retrieved_after", decay_retrieved}}},
          {"forget_seconds", forget_seconds}, {"never_seen_ingest_seconds", ingest_seconds}};
}

ForgetTrial ForgetTrial::from_json(const json& j) {
  ForgetTrial t;
  t.fact = field<int>(j, "fact");
  t.set = field<std::string>(j, "set_before");
  t.retrieved_before = field<bool>(j, "retrieved_before");
  t.retrieved_after = field<bool>(j, "retrieved_after");
  t.decoded_after = field<int>(j, "decoded_after");
  t.decoded_same_subject = field<bool>(j, "decoded_same_subject");
  t.hash_equal = field<bool>(j, "hash_equal_never_seen");
  t.dreadout_never = number(j, "max_abs_dreadout_vs_never_seen");
  t.ripple = number(j, "max_abs_ripple_other_facts");
  t.others = field<long>(j, "others");
  t.others_retrieved_before = field<long>(j, "others_retrieved_before");
  t.others_retrieved_after = field<long>(j, "others_retrieved_after");
  t.others_changed = field<long>(j, "others_decode_changed");
  const json decay = field<json>(j, "decay");
  t.decay_dreadout_never = number(decay, "max_abs_dreadout_vs_never_seen");
  t.decay_retrieved = field<bool>(decay, "retrieved_after");
  t.forget_seconds = number(j, "forget_seconds");
  t.ingest_seconds = number(j, "never_seen_ingest_seconds");
  return t;
}

json EditTrial::to_json() const {
  return {{"fact", fact}, {"kind", kind}, {"corrected_token_id", new_id},
          {"hash_equal_reference", hash_equal}, {"max_abs_dreadout_vs_reference", dreadout_reference},
          {"corrected_fact_retrieved", new_retrieved}, {"old_object_gone", old_object_gone},
          {"old_question_decodes_moved_object", old_question_moved},
          {"others", others}, {"others_retrieved_after", others_retrieved_after}};
}

EditTrial EditTrial::from_json(const json& j) {
  EditTrial t;
  t.fact = field<int>(j, "fact");
  t.kind = field<std::string>(j, "kind");
  t.new_id = field<TokenId>(j, "corrected_token_id");
  t.hash_equal = field<bool>(j, "hash_equal_reference");
  t.dreadout_reference = number(j, "max_abs_dreadout_vs_reference");
  t.new_retrieved = field<bool>(j, "corrected_fact_retrieved");
  t.old_object_gone = field<bool>(j, "old_object_gone");
  t.old_question_moved = field<bool>(j, "old_question_decodes_moved_object");
  t.others = field<long>(j, "others");
  t.others_retrieved_after = field<long>(j, "others_retrieved_after");
  return t;
}

const JsonFields<Result>& result_fields() {
  static const JsonFields<Result> table =
      run_header_fields<Result>() +
      JsonFields<Result>{
          json_member<Result>("settings", &Result::settings),
          json_member<Result>("data_dir", &Result::data_dir),
          json_member<Result>("data_dir_source", &Result::data_dir_source),
          json_member<Result>("facts", &Result::facts),
          json_custom<Result>(
              "forgetting", [](const Result& r) { return trials_json(r.forgetting.trials); },
              [](const json& v, Result& r) { r.forgetting.trials = trials_from<ForgetTrial>(v); }),
          json_custom<Result>(
              "editing", [](const Result& r) { return trials_json(r.editing.trials); },
              [](const json& v, Result& r) { r.editing.trials = trials_from<EditTrial>(v); }),
          json_custom<Result>(
              "erasure", [](const Result& r) { return erasure_json(r.erasure); },
              [](const json& v, Result& r) { r.erasure = erasure_from(v); })};
  return table;
}

json Result::to_json() const { return write_fields(result_fields(), *this); }

Result Result::from_json(const json& j) {
  Result r = read_fields(result_fields(), j, "E7 result");
  if (!r.machine.is_object() || !r.machine.contains("cpu") || !r.machine["cpu"].is_string())
    throw FormatError("E7 result: field `machine` lacks the string `cpu`");
  return r;
}

}  // namespace svattn::experiments::e7_applications
