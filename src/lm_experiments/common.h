// Internal helpers of the trained-model experiments (not installed).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/experiments/experiments.h"
#include "svattn/experiments/report.h"

namespace svattn::experiments::lmx {

/// Machine block: CPU model (/proc/cpuinfo), hardware threads, compiler.
nlohmann::json machine();
/// UTC time stamp.
std::string utc_now();
/// Writes <out>/<id>.md and <out>/<id>.json; sets markdown_file / json_file in `j` first.
void write_outputs(const ExperimentOptions& o, const std::string& id, nlohmann::json& j,
                   const std::string& markdown);
/// A line plot when o.plots, else a PlotResult saying it was skipped on request.
PlotResult line_plot(const ExperimentOptions& o, const std::string& name, const LinePlot& p);
/// Markdown of the plots: embedded images, or why each was skipped.
std::string plots_markdown(const std::vector<PlotResult>& plots);
/// JSON array of the plot results.
nlohmann::json plots_json(const std::vector<PlotResult>& plots);
/// Sample standard deviation (0 for fewer than 2 values).
double sd_of(const std::vector<double>& v);
/// "12 min 5 s" / "41.2 s" / "3.1 h".
std::string duration(double seconds);

}  // namespace svattn::experiments::lmx
