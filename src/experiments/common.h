// Internal helpers shared by the experiment drivers of the wing, torch-free and LibTorch alike
// (not installed): report header, output files, plot lists, presets with `--set` applied.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svattn/clock.h"
#include "svattn/errors.h"
#include "svattn/experiments/options.h"
#include "svattn/experiments/report.h"
#include "svattn/experiments/result.h"

namespace svattn::experiments::detail {

/// j[key] as T, for a typed result's from_json: FormatError "<what>: missing field `key`" or
/// "… has the wrong type".
template <typename T>
T json_field(const nlohmann::json& j, const char* key, const char* what) {
  if (!j.is_object() || !j.contains(key))
    throw FormatError(std::string(what) + ": missing field `" + key + "`");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw FormatError(std::string(what) + ": field `" + key + "` has the wrong type");
  }
}

/// Machine description for the report header: CPU model, core count, compiler, build type.
nlohmann::json machine_info();

/// Writes E?.md and E?.json into options.out_dir (adds markdown_file/json_file to `j`).
void write_outputs(const ExperimentOptions& o, const std::string& id, nlohmann::json& j,
                   const std::string& markdown);

/// The markdown block listing plots (embedded images, or why one was skipped); a plot without a
/// caption is captioned with its file name.
std::string plots_markdown(const std::vector<PlotResult>& plots,
                           const std::vector<std::string>& captions = {});
/// JSON array of the plot results.
nlohmann::json plots_json(const std::vector<PlotResult>& plots);

/// FNV-1a of a string (stable seed component for a named sub-task).
std::uint64_t name_hash(const std::string& s);

/// Keeps `plots` only when options.plots: otherwise marks them skipped on request.
PlotResult maybe_line_plot(const ExperimentOptions& o, const std::string& name, const LinePlot& p);
PlotResult maybe_bar_plot(const ExperimentOptions& o, const std::string& name, const BarPlot& p);

/// Runs `jobs` on `workers` threads (a job per thread at a time, the caller's thread one of them);
/// the first failure is rethrown after every thread has stopped. Callers give every job one
/// LibTorch thread, so the results equal sequential runs.
void run_jobs(const std::vector<std::function<void()>>& jobs, int workers);

/// "12 min 5 s" / "41.2 s" / "3.1 h".
std::string duration(double seconds);

/// The preset `base` (to_json of the experiment's preset struct) with o.overrides for `id`
/// applied, as the struct (SettingError names a bad key).
template <typename P>
P with_overrides(const P& base, const std::string& id, const ExperimentOptions& o) {
  return apply_overrides(nlohmann::json(base), id, o.overrides).template get<P>();
}

}  // namespace svattn::experiments::detail
