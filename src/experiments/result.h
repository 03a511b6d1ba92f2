// The typed result of one experiment run (what `E?.json` holds and what the report is rendered
// from): the envelope every experiment fills (id, preset, scale, headline summary, plots, files)
// and the experiment's own tables and per-run numbers in `details`. to_json / from_json round-trip
// exactly (docs/experiments.md "Results").
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "experiments/report.h"

namespace svattn::experiments {

/// One headline comparison: our number beside the paper's, both as printed, and the row's numbers
/// (e.g. `mean`, `ci95`) as the experiment recorded them.
struct SummaryRow {
  std::string metric;
  std::string paper;
  std::string ours;
  nlohmann::json numbers = nlohmann::json::object();
  bool operator==(const SummaryRow& o) const {
    return metric == o.metric && paper == o.paper && ours == o.ours && numbers == o.numbers;
  }
};

struct ExperimentResult {
  std::string experiment;  ///< "E1" ... "E7"
  std::string title;
  std::string preset;
  std::uint64_t seed = 0;
  std::string scale;  ///< one line: data and scale
  double runtime_seconds = 0;
  std::vector<SummaryRow> summary;
  std::vector<PlotResult> plots;
  std::string markdown_file;  ///< E?.md, relative to the output directory
  std::string json_file;      ///< E?.json
  nlohmann::json data;        ///< the data sources (null when the experiment reads none)
  /// Every other field of E?.json (tables, per-run numbers), experiment-specific.
  nlohmann::json details = nlohmann::json::object();

  nlohmann::json to_json() const;
  /// Throws FormatError naming the missing or mistyped envelope field.
  static ExperimentResult from_json(const nlohmann::json& j);
};

}  // namespace svattn::experiments
