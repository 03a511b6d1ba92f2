// Internal helpers shared by the experiment drivers of the wing, torch-free and LibTorch alike
// (not installed): the `--render` entry of a result type, plot lists, seeds of named sub-tasks,
// the job pool, presets with `--set` applied.
#pragma once
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/clock.h"
#include "svattn/errors.h"
#include "experiments/framework/json_fields.h"
#include "experiments/framework/run_header.h"
#include "experiments/options.h"
#include "experiments/registry.h"
#include "experiments/report.h"
#include "experiments/result.h"

namespace svattn::experiments::detail {

// The support layer's clock (src/support/clock.h), by its short names.
using support::Stopwatch;
using support::utc_now;

/// x, or null when x is NaN (JSON has no NaN), for JSON a report writes beside its typed result
/// (whose keys are field tables: framework/json_fields.h).
inline nlohmann::json number_or_null(double x) {
  return x != x ? nlohmann::json(nullptr) : nlohmann::json(x);
}

/// The Renderer of an experiment whose typed result R sits under `key` of its E?.json ("" = the
/// file itself): render(R::from_json(...), options).
template <typename R>
Renderer file_renderer(const char* key,
                       ExperimentResult (*render)(const R&, const ExperimentOptions&)) {
  return [key, render](const nlohmann::json& file, const ExperimentOptions& o) {
    if (*key == '\0') return render(R::from_json(file), o);
    return render(R::from_json(read_json_key<nlohmann::json>(file, key, "the experiment's JSON")), o);
  };
}

using svattn::experiments::machine_info;  // framework/run_header.h

/// The markdown block listing plots (embedded images, or why one was skipped); a plot without a
/// caption is captioned with its file name.
std::string plots_markdown(const std::vector<PlotResult>& plots,
                           const std::vector<std::string>& captions = {});

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
