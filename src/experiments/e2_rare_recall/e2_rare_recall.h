// E2 rare-item recall under skewed redundancy at equal token budget.
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e2_rare_recall/info.h"
#include "experiments/framework/run_header.h"
#include "experiments/options.h"
#include "experiments/result.h"

namespace svattn::experiments::e2_rare_recall {

/// A preset's fields (the `--set` keys).
struct Settings {
  int tokens = 0;         ///< stream length T
  int dim = 0;
  int patterns = 0;       ///< frequent patterns F
  double rare_share = 0;  ///< share of rare (unique) items
  double noise = 0;       ///< noise of a frequent copy and of any query, relative to N(0, I)
  std::vector<int> budgets;
  int headline_budget = 0;
  int seeds = 0;  ///< in a Result: the seeds run (`--set E2.seeds`)
};

/// One method's selection at one budget on one seed's stream, scored.
struct Outcome {
  double recall = 0;     ///< share of rare items retained
  double retrieved = 0;  ///< share whose retrieval query's nearest retained key is the item itself
  double coverage = 0;   ///< share of frequent patterns with at least one retained copy
  int kept = 0;
  int support = -1;  ///< SV methods: |S ∪ E| before truncation; -1 for the others
  bool truncated = false;
};

/// What a run measured: render()'s only input. E2.json holds it (to_json's keys), so the report
/// can be rendered again from the file (from_json) without re-running the selections.
struct Result : RunHeader {
  Settings settings;            ///< after `--set`
  std::vector<double> sigmas;   ///< the RBF bandwidth of each seed's stream
  /// outcomes[method][budget index][seed], methods by their JSON name (method_name)
  std::map<std::string, std::vector<std::vector<Outcome>>> outcomes;

  nlohmann::json to_json() const;
  /// FormatError naming the field when `j` is not an E2 result.
  static Result from_json(const nlohmann::json& j);
};

/// The preset "tiny" | "quick" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// The range of every preset key (the `--set` checks; docs/experiments.md "Ranges of the `--set`
/// keys").
RangeTable ranges();
/// Runs every method on every seed's stream at every budget (no files written).
Result measure(const ExperimentOptions& options);
/// Writes <out_dir>/E2.md, E2.json (the result and the tables derived from it) and the plot.
ExperimentResult render(const Result& result, const ExperimentOptions& options);
/// render(measure(options), options).
ExperimentResult run(const ExperimentOptions& options);

}  // namespace svattn::experiments::e2_rare_recall
