// The report builder: an experiment's render() puts its Markdown, tables, plots, headline rows
// and descriptive JSON keys into one ReportBuilder, and write() produces E?.md and E?.json (the
// typed result's keys beside the descriptive ones) and the ExperimentResult, without reading any
// JSON back.
#pragma once
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/framework/experiment_info.h"
#include "experiments/framework/plots.h"
#include "experiments/framework/run_header.h"
#include "experiments/framework/table.h"
#include "experiments/options.h"
#include "experiments/result.h"

namespace svattn::experiments {

class ReportBuilder {
 public:
  /// Creates options.out_dir (plots are written there as they are added).
  ReportBuilder(const ExperimentInfo& info, const RunHeader& run, const ExperimentOptions& options);

  /// The Markdown of E?.md, in order.
  std::ostringstream& md() { return md_; }
  /// A descriptive key of E?.json (derived numbers, settings' descriptions) as an lvalue.
  nlohmann::json& json(const std::string& key) { return json_[key]; }
  /// The one line of data and scale of the report's header; the data sources (null: none).
  void set_scale(std::string scale) { scale_ = std::move(scale); }
  void set_data(nlohmann::json data) { data_ = std::move(data); }
  /// The table under `tables.<key>` of E?.json.
  void add_table(const std::string& key, const Table& table) { tables_[key] = table.json(); }
  /// A headline row: ours beside the paper, with the numbers behind it (e.g. mean, ci95).
  void add_summary(std::string metric, std::string paper, std::string ours,
                   nlohmann::json numbers = nlohmann::json::object());
  /// Draws a plot unless options.plots is off (then it is recorded as skipped on request).
  const PlotResult& add_line_plot(const std::string& name, const LinePlot& plot);
  const PlotResult& add_bar_plot(const std::string& name, const BarPlot& plot);
  /// A plot drawn elsewhere (its result as it came back).
  void add_plot(PlotResult plot) { plots_.push_back(std::move(plot)); }
  const std::vector<PlotResult>& plots() const { return plots_; }

  /// Writes E?.md and E?.json into options.out_dir: the run header's `created` and `machine`, the
  /// descriptive keys, then the typed result's keys (an object both hold is merged, the typed
  /// entries winning), then the envelope (experiment, title, preset, seed, scale, summary, tables,
  /// plots, run time, files). The ExperimentResult's details are every key but the envelope's.
  ExperimentResult write(const nlohmann::json& typed);

 private:
  const ExperimentInfo& info_;
  const RunHeader& run_;
  const ExperimentOptions& options_;
  std::ostringstream md_;
  nlohmann::json json_ = nlohmann::json::object();
  nlohmann::json tables_ = nlohmann::json::object();
  nlohmann::json data_;
  std::string scale_;
  std::vector<SummaryRow> summary_;
  std::vector<PlotResult> plots_;
};

}  // namespace svattn::experiments
