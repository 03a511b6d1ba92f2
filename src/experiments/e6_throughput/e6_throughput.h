// E6 training throughput of the 3m presets and the ratio to full softmax (LibTorch).
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e6_throughput/info.h"
#include "experiments/framework/run_header.h"
#include "experiments/options.h"
#include "experiments/result.h"

namespace svattn::experiments::e6_throughput {

/// A preset's fields (the `--set` keys).
struct Settings {
  std::vector<std::string> presets;  ///< LM presets, the first is the reference
  std::int64_t batch = 0, seq = 0, steps = 0, warmup = 0;
  std::string corpus;
  std::string device = "cpu";  ///< "cuda" on a GPU (scripts/gpu-paper.sh)
};

/// One LM preset's measured training throughput (lm::measure_throughput).
struct Row {
  std::string preset;
  std::int64_t parameters = 0;
  double tokens_per_second = 0;
  double seconds_per_step = 0;
  std::optional<double> sv_forward_share;  ///< presets with an SV memory only
  std::optional<double> support_mean;      ///< mean |S ∪ E| per head, ditto
};

/// What a run measured: render()'s only input. E6.json holds it (to_json), so the report can be
/// rendered again from the file (from_json) without measuring.
struct Result : RunHeader {
  Settings settings;      ///< after the `--set` overrides
  std::string corpus;     ///< the corpus's label
  std::vector<Row> rows;  ///< one per settings.presets entry; the first is the reference

  nlohmann::json to_json() const;
  /// FormatError naming the field when `j` is not an E6 result.
  static Result from_json(const nlohmann::json& j);
};

/// The preset "tiny" | "quick" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// The range of every preset key (the `--set` checks; docs/experiments.md "Ranges of the `--set`
/// keys").
RangeTable ranges();
/// Measures every preset's throughput (no files written).
Result measure(const ExperimentOptions& options);
/// Writes <out_dir>/E6.md, E6.json (the result and the tables derived from it) and the plot.
ExperimentResult render(const Result& result, const ExperimentOptions& options);
/// render(measure(options), options).
ExperimentResult run(const ExperimentOptions& options);

}  // namespace svattn::experiments::e6_throughput
