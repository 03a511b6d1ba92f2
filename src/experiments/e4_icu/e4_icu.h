// E4 ICU streams: critical-deterioration hours retained at equal budget (MIMIC-III demo, PhysioNet 2012).
// Entry points for the registry (registry.h); the design and measured numbers are in
// docs/experiments.md.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e4_icu/info.h"
#include "experiments/framework/run_header.h"
#include "experiments/options.h"
#include "experiments/result.h"
#include "experiments/selection.h"

namespace svattn::experiments::e4_icu {

/// A preset's fields (the `--set` keys).
struct Settings {
  std::vector<std::string> datasets;  ///< "mimic", "physionet2012"
  int max_stays = 0;                  ///< 0 = all
  std::vector<double> fractions;      ///< budgets as shares of each stay
  double headline_fraction = 0;
  int random_draws = 0;
};

/// Critical hours retained by one method at one budget, summed over stays.
struct Tally {
  double critical_retained = 0;  ///< (random: mean over draws)
  long critical_total = 0;
  long retained_tokens = 0;      ///< summed over stays (random: per draw, all draws equal)
  long budget_tokens = 0;
  std::vector<double> per_stay;  ///< share per stay with >= 1 critical hour
};

/// One dataset's run: counts, each method's tally per budget, the label-aware upper bound and the
/// criticality sweep. Budgets are keyed by their fraction (exactly Settings::fractions).
struct DatasetResult {
  std::string name;
  std::string source;
  int stays_total = 0, stays_used = 0, stays_with_critical = 0;
  long hours = 0, critical_hours = 0;
  long rows_read = 0, rows_out_of_range = 0, rows_flagged_error = 0;
  std::map<Method, std::map<double, Tally>> tallies;
  /// Upper bound at each budget: an oracle that knows the labels keeps min(B, critical) of them.
  std::map<double, Tally> upper;
  /// Hours meeting each threshold (an hour may meet several), in critical_thresholds() order.
  std::vector<long> reason_counts;
  /// The criticality sweep, in criticality_definitions() order: critical hours, stays with one,
  /// and per budget each method's tally beside the label-aware upper bound.
  struct SweepCell {
    std::map<Method, Tally> methods;
    Tally upper;
  };
  struct Definition {
    long critical_hours = 0;
    int stays_with_critical = 0;
    std::map<double, SweepCell> cells;
  };
  std::vector<Definition> sweep;
  double seconds = 0;
};

/// What a run measured: render()'s only input. E4.json holds it under `result` (to_json), so the
/// report can be rendered again from the file (from_json) without reading the data.
struct Result : RunHeader {
  Settings settings;  ///< after `--set`
  std::string data_dir, data_dir_source;  ///< where the data were read, and why there
  std::vector<DatasetResult> datasets;

  nlohmann::json to_json() const;
  /// FormatError naming the field when `j` is not an E4 result.
  static Result from_json(const nlohmann::json& j);
};

/// The preset "tiny" | "quick" | "paper" as a flat JSON object (the `--set` keys).
nlohmann::json preset(const std::string& name);
/// The range of every preset key (the `--set` checks; docs/experiments.md "Ranges of the `--set`
/// keys").
RangeTable ranges();
/// Reads the datasets and runs every method on every stay at every budget (no files written).
Result measure(const ExperimentOptions& options);
/// Writes <out_dir>/E4.md, E4.json (the result and the tables derived from it) and the plots.
ExperimentResult render(const Result& result, const ExperimentOptions& options);
/// render(measure(options), options).
ExperimentResult run(const ExperimentOptions& options);

}  // namespace svattn::experiments::e4_icu
