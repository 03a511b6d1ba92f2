// ExperimentResult <-> E?.json (result.h): the envelope's keys in one field table; every other key
// of the file is the experiment's `details`.
#include "experiments/result.h"

#include "svattn/errors.h"
#include "experiments/framework/json_fields.h"

namespace svattn::experiments {
namespace {

using nlohmann::json;
using R = ExperimentResult;

constexpr const char* kWhat = "experiment result";

/// A string member written only when not empty; read as empty when absent or not a string.
JsonField<R> string_or_empty(const char* name, std::string R::*member) {
  JsonField<R> f;
  f.name = name;
  f.write = [member, key = f.name](const R& r, json& j) {
    if (!(r.*member).empty()) j[key] = r.*member;
  };
  f.read = [member, key = f.name](const json& j, R& r, const std::string&) {
    r.*member = j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  return f;
}

json summary_json(const R& r) {
  json s = json::array();
  for (const auto& x : r.summary) {
    json row = x.numbers.is_object() ? x.numbers : json::object();
    row["metric"] = x.metric;
    row["paper"] = x.paper;
    row["ours"] = x.ours;
    s.push_back(row);
  }
  return s;
}

void summary_from(const json& v, R& r) {
  for (const auto& row : v) {
    SummaryRow s;
    for (const char* k : {"metric", "paper", "ours"}) {
      if (!row.contains(k) || !row[k].is_string())
        throw FormatError(std::string("experiment result: a `summary` row lacks the string `") + k +
                          "`");
    }
    s.metric = row["metric"].get<std::string>();
    s.paper = row["paper"].get<std::string>();
    s.ours = row["ours"].get<std::string>();
    s.numbers = row;
    for (const char* k : {"metric", "paper", "ours"}) s.numbers.erase(k);
    r.summary.push_back(s);
  }
}

json plots_json(const R& r) {
  json p = json::array();
  for (const auto& pl : r.plots) p.push_back(pl.json());
  return p;
}

void plots_from(const json& v, R& r) {
  for (const auto& p : v) {
    PlotResult pr;
    pr.file = p.contains("file") && p["file"].is_string() ? p["file"].get<std::string>() : "";
    pr.written = p.value("written", false);
    pr.note = p.contains("note") && p["note"].is_string() ? p["note"].get<std::string>() : "";
    r.plots.push_back(pr);
  }
}

/// The envelope: the keys every E?.json has (and `details` lacks).
const JsonFields<R>& envelope_fields() {
  static const JsonFields<R> table = {
      json_member<R>("experiment", &R::experiment),
      json_member<R>("title", &R::title),
      json_member<R>("preset", &R::preset),
      json_member<R>("seed", &R::seed),
      string_or_empty("scale", &R::scale),
      json_member<R>("runtime_seconds", &R::runtime_seconds),
      json_custom<R>("summary", summary_json, summary_from),
      json_optional(json_custom<R>("plots", plots_json, plots_from)),
      string_or_empty("markdown_file", &R::markdown_file),
      string_or_empty("json_file", &R::json_file),
      json_optional(json_member<R>("data", &R::data), [](const R& r) { return !r.data.is_null(); })};
  return table;
}

}  // namespace

json ExperimentResult::to_json() const {
  return write_fields(envelope_fields(), *this, details.is_object() ? details : json::object());
}

ExperimentResult ExperimentResult::from_json(const json& j) {
  ExperimentResult r = read_fields(envelope_fields(), j, kWhat);
  r.details = j;
  for (const auto& f : envelope_fields()) r.details.erase(f.name);
  return r;
}

}  // namespace svattn::experiments
