// ExperimentResult <-> E?.json (result.h).
#include "experiments/result.h"

#include "svattn/errors.h"

namespace svattn::experiments {
namespace {

using nlohmann::json;

const char* const kEnvelope[] = {"experiment",    "title",           "preset",  "seed",
                                 "scale",         "runtime_seconds", "summary", "plots",
                                 "markdown_file", "json_file",       "data"};

template <typename T>
T field(const json& j, const char* key) {
  if (!j.contains(key))
    throw FormatError(std::string("experiment result: missing field `") + key + "`");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw FormatError(std::string("experiment result: field `") + key + "` has the wrong type");
  }
}

std::string str_or_empty(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

}  // namespace

json ExperimentResult::to_json() const {
  json j = details.is_object() ? details : json::object();
  j["experiment"] = experiment;
  j["title"] = title;
  j["preset"] = preset;
  j["seed"] = seed;
  if (!scale.empty()) j["scale"] = scale;
  j["runtime_seconds"] = runtime_seconds;
  json s = json::array();
  for (const auto& r : summary) {
    json row = r.numbers.is_object() ? r.numbers : json::object();
    row["metric"] = r.metric;
    row["paper"] = r.paper;
    row["ours"] = r.ours;
    s.push_back(row);
  }
  j["summary"] = s;
  json p = json::array();
  for (const auto& pl : plots) p.push_back(pl.json());
  j["plots"] = p;
  if (!markdown_file.empty()) j["markdown_file"] = markdown_file;
  if (!json_file.empty()) j["json_file"] = json_file;
  if (!data.is_null()) j["data"] = data;
  return j;
}

ExperimentResult ExperimentResult::from_json(const json& j) {
  if (!j.is_object()) throw FormatError("experiment result: not a JSON object");
  ExperimentResult r;
  r.experiment = field<std::string>(j, "experiment");
  r.title = field<std::string>(j, "title");
  r.preset = field<std::string>(j, "preset");
  r.seed = field<std::uint64_t>(j, "seed");
  r.scale = str_or_empty(j, "scale");
  r.runtime_seconds = field<double>(j, "runtime_seconds");
  for (const auto& row : field<json>(j, "summary")) {
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
  if (j.contains("plots")) {
    for (const auto& p : j["plots"]) {
      PlotResult pr;
      pr.file = str_or_empty(p, "file");
      pr.written = p.value("written", false);
      pr.note = str_or_empty(p, "note");
      r.plots.push_back(pr);
    }
  }
  r.markdown_file = str_or_empty(j, "markdown_file");
  r.json_file = str_or_empty(j, "json_file");
  if (j.contains("data")) r.data = j["data"];
  r.details = j;
  for (const char* k : kEnvelope) r.details.erase(k);
  return r;
}

}  // namespace svattn::experiments
