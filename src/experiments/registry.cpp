// The one registry of the paper's experiments (registry.h): the table E1 ... E7 built from what
// each experiment says of itself (its ExperimentInfo), installation of the LibTorch ones, override
// checks and dispatch.
#include "experiments/registry.h"

#include <algorithm>
#include <cctype>

#include "common.h"
#include "svattn/errors.h"
#include "experiments/e1_forgetting/e1_forgetting.h"
#include "experiments/e2_rare_recall/e2_rare_recall.h"
#include "experiments/e3_selective_copy/info.h"
#include "experiments/e4_icu/e4_icu.h"
#include "experiments/e5_char_lm/info.h"
#include "experiments/e6_throughput/info.h"
#include "experiments/e7_applications/info.h"
#ifdef SVATTN_EXPERIMENTS_HAVE_STORE
#include "experiments/e7_applications/e7_applications.h"
#endif

namespace svattn::experiments {
namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

/// The registry's entry of an experiment, from what the experiment says of itself.
Experiment listed(const ExperimentInfo& info) {
  Experiment e;
  e.id = info.id;
  e.title = info.title;
  e.paper_result = info.paper_result;
  e.needs = info.needs;
  return e;
}

std::vector<Experiment> make_table() {
  std::vector<Experiment> t = {listed(e1_forgetting::kInfo),     listed(e2_rare_recall::kInfo),
                               listed(e3_selective_copy::kInfo), listed(e4_icu::kInfo),
                               listed(e5_char_lm::kInfo),        listed(e6_throughput::kInfo),
                               listed(e7_applications::kInfo)};
  t[0].run = e1_forgetting::run;
  t[0].presets = e1_forgetting::preset;
  t[1].run = e2_rare_recall::run;
  t[1].presets = e2_rare_recall::preset;
  t[3].run = e4_icu::run;
  t[3].presets = e4_icu::preset;
  t[2].extra_presets = {"cpu"};
  t[4].extra_presets = {"cpu"};
  t[0].render_file = detail::file_renderer("result", e1_forgetting::render);
  t[1].render_file = detail::file_renderer("", e2_rare_recall::render);
  t[3].render_file = detail::file_renderer("result", e4_icu::render);
  t[0].ranges = e1_forgetting::ranges();
  t[1].ranges = e2_rare_recall::ranges();
  t[3].ranges = e4_icu::ranges();
#ifdef SVATTN_EXPERIMENTS_HAVE_STORE
  t[6].run = e7_applications::run;
  t[6].presets = e7_applications::preset;
  t[6].render_file = detail::file_renderer("result", e7_applications::render);
  t[6].ranges = e7_applications::ranges();
#endif
  return t;
}

std::vector<Experiment>& table() {
  static std::vector<Experiment> t = make_table();
  return t;
}

Experiment& entry(const std::string& id) {
  const std::string up = upper(id);
  for (auto& e : table())
    if (e.id == up) return e;
  throw InvalidArgument("unknown experiment '" + id + "' (expected E1 … E7)");
}

LearnedKeysSource& keys_source() {
  static LearnedKeysSource s;
  return s;
}

}  // namespace

const std::vector<Experiment>& all_experiments() { return table(); }

const Experiment& find_experiment(const std::string& id) { return entry(id); }

std::vector<std::string> experiment_ids() {
  std::vector<std::string> ids;
  for (const auto& e : table())
    if (e.available()) ids.push_back(e.id);
  return ids;
}

void install_experiment(const std::string& id, Runner run, PresetTable presets,
                        Renderer render_file, RangeTable ranges) {
  Experiment& e = entry(id);
  if (!run || !presets) throw InvalidArgument("empty runner or preset table for " + e.id);
  e.run = std::move(run);
  e.presets = std::move(presets);
  e.render_file = std::move(render_file);
  e.ranges = std::move(ranges);
}

void uninstall_experiment(const std::string& id) {
  Experiment& e = entry(id);
  e.run = {};
  e.presets = {};
  e.render_file = {};
  e.ranges = {};
}

bool Experiment::has_preset(const std::string& name) const {
  return name == "tiny" || name == "quick" || name == "paper" ||
         std::find(extra_presets.begin(), extra_presets.end(), name) != extra_presets.end();
}

void check_overrides(const ExperimentOptions& o, const std::vector<std::string>& ids) {
  o.validate();
  std::vector<std::string> up;
  for (const auto& id : ids) up.push_back(entry(id).id);
  for (const auto& id : up) {
    if (!entry(id).has_preset(o.preset))
      throw InvalidArgument("experiment " + id + " has no preset '" + o.preset +
                            "' (tiny, quick, paper" +
                            (entry(id).extra_presets.empty() ? "" : " and its own") + ")");
  }
  for (const auto& ov : o.overrides) {
    if (ov.scope.empty()) {
      if (up.size() == 1) continue;
      throw SettingError(ov.key, "name the experiment when several run (E?." + ov.key + "=...)");
    }
    const std::string name = ov.scope + "." + ov.key;
    const Experiment* e = nullptr;
    for (const auto& x : table())
      if (x.id == ov.scope) e = &x;
    if (e == nullptr)
      throw SettingError(name, "unknown experiment " + ov.scope + " (expected E1 … E7)");
    if (!e->available())
      throw SettingError(name, ov.scope + " is not available in this build: needs " + e->needs);
    if (std::find(up.begin(), up.end(), ov.scope) == up.end())
      throw SettingError(name, ov.scope + " is not among the experiments being run");
  }
  for (const auto& id : up) {
    const Experiment& e = entry(id);
    if (e.available())
      check_ranges(apply_overrides(e.presets(o.preset), e.id, o.overrides), e.id, e.ranges);
  }
}

ExperimentResult run_experiment(const std::string& id, const ExperimentOptions& o) {
  const Experiment& e = entry(id);
  if (!e.available())
    throw InvalidArgument("experiment " + e.id + " is not available: needs " + e.needs);
  for (const auto& ov : o.overrides) {
    if (ov.scope.empty() || ov.scope == e.id) continue;
    throw SettingError(ov.scope + "." + ov.key,
                       "scoped to " + ov.scope + ", but " + e.id + " is being run");
  }
  check_overrides(o, {e.id});
  return e.run(o);
}

ExperimentResult render_experiment_file(const std::string& id, const std::string& path,
                                        const ExperimentOptions& o) {
  const Experiment& e = find_experiment(id);
  if (!e.render_file)
    throw InvalidArgument(e.id + " cannot be rendered by this build: it needs " + e.needs);
  o.validate();
  const nlohmann::json file = nlohmann::json::parse(read_text_file(path), nullptr, false);
  if (file.is_discarded()) throw FormatError("'" + path + "' is not JSON");
  if (!file.is_object() || !file.contains("experiment") || file["experiment"] != e.id)
    throw FormatError("'" + path + "' is not an " + e.id + ".json (its field `experiment` is not " +
                      e.id + ")");
  try {
    return e.render_file(file, o);
  } catch (const FormatError& err) {
    throw FormatError("'" + path + "': " + err.what());
  }
}

void install_learned_keys_source(LearnedKeysSource source) { keys_source() = std::move(source); }

const LearnedKeysSource& learned_keys_source() { return keys_source(); }

}  // namespace svattn::experiments
