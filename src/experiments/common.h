// Internal helpers shared by the experiment drivers (not installed).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/experiments/experiments.h"
#include "svattn/experiments/report.h"

namespace svattn::experiments::detail {

/// Machine description for the report header: CPU model, core count, compiler, build type.
nlohmann::json machine_info();

/// UTC time stamp "2025-01-31T12:00:00Z".
std::string utc_now();

/// Writes E?.md and E?.json into options.out_dir (adds markdown_file/json_file/runtime to `j`).
void write_outputs(const ExperimentOptions& o, const std::string& id, nlohmann::json& j,
                   const std::string& markdown);

/// The markdown block listing plots (embedded images, or why one was skipped).
std::string plots_markdown(const std::vector<PlotResult>& plots,
                           const std::vector<std::string>& captions);

/// FNV-1a of a string (stable seed component for a named sub-task).
std::uint64_t name_hash(const std::string& s);

/// Keeps `plots` only when options.plots: otherwise marks them skipped on request.
PlotResult maybe_line_plot(const ExperimentOptions& o, const std::string& name, const LinePlot& p);
PlotResult maybe_bar_plot(const ExperimentOptions& o, const std::string& name, const BarPlot& p);

}  // namespace svattn::experiments::detail
