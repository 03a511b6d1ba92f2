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

constexpr const char* kWhat = "E7 result";

// Every measured double is written as a number or null (NaN or ±infinity) and reads null back as
// NaN (json_number_or_nan).

const JsonFields<AucInterval>& auc_fields() {
  using A = AucInterval;
  static const JsonFields<A> table = {
      json_number_or_nan<A>("auc", &A::auc), json_number_or_nan<A>("lo", &A::lo),
      json_number_or_nan<A>("hi", &A::hi), json_member<A>("reps", &A::reps)};
  return table;
}

/// Each score group as its array of per-patient scores.
const JsonFields<ProbeScores>& probe_fields() {
  using P = ProbeScores;
  static const JsonFields<P> table = {json_member_in<P>("erased", &P::erased, &ScoreGroup::scores),
                                      json_member_in<P>("never", &P::never, &ScoreGroup::scores),
                                      json_member_in<P>("present", &P::present, &ScoreGroup::scores)};
  return table;
}

const JsonFields<RemovalMethod>& method_fields() {
  using M = RemovalMethod;
  static const JsonFields<M> table = {
      json_member<M>("name", &M::name),
      json_member<M>("label", &M::label),
      json_member<M>("exact", &M::exact),
      json_number_or_nan<M>("dalpha", &M::dalpha),
      json_number_or_nan<M>("ddecision", &M::ddecision),
      json_number_or_nan<M>("dreadout", &M::dreadout),
      json_struct<M>("auc_erased_never", &M::auc_erased_never, auc_fields, kWhat),
      json_struct<M>("auc_present_never", &M::auc_present_never, auc_fields, kWhat)};
  return table;
}

/// The removal methods the report needs (exact erasure, the never-seen store, decay).
void check_methods(const ErasureResult& r) {
  for (const char* name : {"exact", "never_seen", "decay"}) {
    if (std::none_of(r.methods.begin(), r.methods.end(), [&](const RemovalMethod& m) { return m.name == name; }))
      throw FormatError(std::string("E7 result: field `methods` lacks the method ") + name);
  }
}

const JsonFields<ErasureResult>& erasure_fields() {
  using E = ErasureResult;
  static const JsonFields<E> table = {
      json_member<E>("source", &E::source), json_member<E>("stays_eligible", &E::stays_eligible),
      json_member<E>("members", &E::members), json_member<E>("erased", &E::erased),
      json_member<E>("never_seen", &E::never_seen), json_member<E>("max_hours", &E::max_hours),
      json_member<E>("tokens_before", &E::tokens_before), json_member<E>("tokens_after", &E::tokens_after),
      json_number_or_nan<E>("sigma", &E::sigma), json_number_or_nan<E>("C", &E::C),
      json_member<E>("margin", &E::margin), json_member<E>("error", &E::error),
      json_member<E>("reserve", &E::reserve), json_member<E>("certificates", &E::certificates),
      json_member<E>("certificates_hash_equal", &E::certificates_hash_equal),
      json_member<E>("certificates_kkt_ok", &E::certificates_kkt_ok),
      json_member<E>("wal_truncated", &E::wal_truncated),
      json_member<E>("first_certificate", &E::first_certificate),
      json_member<E>("store_hash_equal", &E::store_hash_equal),
      json_member<E>("sha_erased", &E::sha_erased), json_member<E>("sha_never", &E::sha_never),
      json_member<E>("scores_bit_identical", &E::scores_bit_identical),
      json_number_or_nan<E>("max_abs_dscore_vs_never_store", &E::max_abs_dscore_vs_never_store),
      json_member<E>("verify_ok", &E::verify_ok), json_member<E>("verify_problems", &E::verify_problems),
      json_member<E>("scan", &E::scan),
      json_struct<E>("auc_before", &E::auc_before, auc_fields, kWhat),
      json_member_in<E>("erased_before", &E::erased_before, &ScoreGroup::scores),
      json_struct<E>("exact_scores", &E::exact_scores, probe_fields, kWhat),
      json_struct<E>("decay_scores", &E::decay_scores, probe_fields, kWhat),
      json_checked(json_struct_array<E>("methods", &E::methods, method_fields, kWhat), check_methods),
      json_number_or_nan<E>("add_seconds", &E::add_seconds),
      json_number_or_nan<E>("forget_seconds_total", &E::forget_seconds_total),
      json_number_or_nan<E>("never_store_seconds", &E::never_store_seconds),
      json_number_or_nan<E>("seconds", &E::seconds)};
  return table;
}

const JsonFields<ForgetTrial>& forget_trial_fields() {
  using T = ForgetTrial;
  static const JsonFields<T> table = {
      json_member<T>("fact", &T::fact), json_member<T>("set_before", &T::set),
      json_member<T>("retrieved_before", &T::retrieved_before),
      json_member<T>("retrieved_after", &T::retrieved_after),
      json_member<T>("decoded_after", &T::decoded_after),
      json_member<T>("decoded_same_subject", &T::decoded_same_subject),
      json_member<T>("hash_equal_never_seen", &T::hash_equal),
      json_number_or_nan<T>("max_abs_dreadout_vs_never_seen", &T::dreadout_never),
      json_number_or_nan<T>("max_abs_ripple_other_facts", &T::ripple),
      json_member<T>("others", &T::others),
      json_member<T>("others_retrieved_before", &T::others_retrieved_before),
      json_member<T>("others_retrieved_after", &T::others_retrieved_after),
      json_member<T>("others_decode_changed", &T::others_changed),
      json_group<T>("decay",
                    {json_number_or_nan<T>("max_abs_dreadout_vs_never_seen", &T::decay_dreadout_never),
                     json_member<T>("retrieved_after", &T::decay_retrieved)},
                    kWhat),
      json_number_or_nan<T>("forget_seconds", &T::forget_seconds),
      json_number_or_nan<T>("never_seen_ingest_seconds", &T::ingest_seconds)};
  return table;
}

const JsonFields<EditTrial>& edit_trial_fields() {
  using T = EditTrial;
  static const JsonFields<T> table = {
      json_member<T>("fact", &T::fact), json_member<T>("kind", &T::kind),
      json_member<T>("corrected_token_id", &T::new_id),
      json_member<T>("hash_equal_reference", &T::hash_equal),
      json_number_or_nan<T>("max_abs_dreadout_vs_reference", &T::dreadout_reference),
      json_member<T>("corrected_fact_retrieved", &T::new_retrieved),
      json_member<T>("old_object_gone", &T::old_object_gone),
      json_member<T>("old_question_decodes_moved_object", &T::old_question_moved),
      json_member<T>("others", &T::others),
      json_member<T>("others_retrieved_after", &T::others_retrieved_after)};
  return table;
}

const JsonFields<ForgettingResult>& forgetting_fields() {
  static const JsonFields<ForgettingResult> table = {json_struct_array<ForgettingResult>(
      "trials", &ForgettingResult::trials, forget_trial_fields, kWhat)};
  return table;
}

const JsonFields<EditingResult>& editing_fields() {
  static const JsonFields<EditingResult> table = {
      json_struct_array<EditingResult>("trials", &EditingResult::trials, edit_trial_fields, kWhat)};
  return table;
}

}  // namespace

std::vector<double> ScoreGroup::flat() const {
  std::vector<double> v;
  for (const auto& g : scores) v.insert(v.end(), g.begin(), g.end());
  return v;
}

json ForgetTrial::to_json() const { return write_fields(forget_trial_fields(), *this); }

ForgetTrial ForgetTrial::from_json(const json& j) { return read_fields(forget_trial_fields(), j, kWhat); }

json EditTrial::to_json() const { return write_fields(edit_trial_fields(), *this); }

EditTrial EditTrial::from_json(const json& j) { return read_fields(edit_trial_fields(), j, kWhat); }

const JsonFields<Result>& result_fields() {
  static const JsonFields<Result> table =
      run_header_fields<Result>() +
      JsonFields<Result>{
          json_member<Result>("settings", &Result::settings),
          json_member<Result>("data_dir", &Result::data_dir),
          json_member<Result>("data_dir_source", &Result::data_dir_source),
          json_member<Result>("facts", &Result::facts),
          json_struct<Result>("forgetting", &Result::forgetting, forgetting_fields, kWhat),
          json_struct<Result>("editing", &Result::editing, editing_fields, kWhat),
          json_struct<Result>("erasure", &Result::erasure, erasure_fields, kWhat)};
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
