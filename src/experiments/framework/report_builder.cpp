// The report builder (framework/report_builder.h).
#include "experiments/framework/report_builder.h"

#include <filesystem>

#include "common.h"
#include "experiments/framework/files.h"

namespace svattn::experiments {

ReportBuilder::ReportBuilder(const ExperimentInfo& info, const RunHeader& run,
                             const ExperimentOptions& options)
    : info_(info), run_(run), options_(options) {
  ensure_dir(options.out_dir);
}

void ReportBuilder::add_summary(std::string metric, std::string paper, std::string ours,
                                nlohmann::json numbers) {
  summary_.push_back({std::move(metric), std::move(paper), std::move(ours), std::move(numbers)});
}

const PlotResult& ReportBuilder::add_line_plot(const std::string& name, const LinePlot& plot) {
  plots_.push_back(detail::maybe_line_plot(options_, name, plot));
  return plots_.back();
}

const PlotResult& ReportBuilder::add_bar_plot(const std::string& name, const BarPlot& plot) {
  plots_.push_back(detail::maybe_bar_plot(options_, name, plot));
  return plots_.back();
}

ExperimentResult ReportBuilder::write(const nlohmann::json& typed) {
  nlohmann::json j = json_;
  j["created"] = run_.created;
  j["machine"] = run_.machine;
  for (const auto& [key, value] : typed.items()) {
    if (j.contains(key) && j[key].is_object() && value.is_object())
      for (const auto& [k, v] : value.items()) j[key][k] = v;
    else
      j[key] = value;
  }
  ExperimentResult r;
  r.experiment = info_.id;
  r.title = info_.title;
  r.preset = run_.preset;
  r.seed = run_.seed;
  r.scale = scale_;
  r.runtime_seconds = run_.measure_seconds;
  r.summary = summary_;
  r.plots = plots_;
  r.markdown_file = r.experiment + ".md";
  r.json_file = r.experiment + ".json";
  r.data = data_;
  if (!tables_.empty()) j["tables"] = tables_;
  r.details = j;
  // The keys ExperimentResult::to_json writes from its own fields (result.cpp's envelope).
  for (const char* k : {"experiment", "title", "preset", "seed", "scale", "runtime_seconds", "summary",
                        "plots", "markdown_file", "json_file", "data"})
    r.details.erase(k);
  const std::filesystem::path out(options_.out_dir);
  write_text_file((out / r.markdown_file).string(), md_.str());
  write_json_file((out / r.json_file).string(), r.to_json());
  return r;
}

}  // namespace svattn::experiments
