// The paper's experiments that need no trained model: E1 exact forgetting, E2 rare-item recall
// under skewed redundancy, E4 ICU critical hours retained at equal budget, E7 applications (fact
// forgetting, knowledge editing, patient erasure from the audited store) (SPEC §11).
//
// Each run_* writes `<out_dir>/E?.md` (our table beside the paper's numbers, data and scale),
// `<out_dir>/E?.json` (the same numbers, machine-readable) and PNG plots, and returns the JSON it
// wrote. A report writer (`svattn reproduce`) calls run_experiment() per id and reads back:
//   json["experiment"], ["title"], ["preset"], ["seed"], ["data"], ["runtime_seconds"],
//   ["markdown_file"], ["json_file"], ["plots"] (array of {file, written, note}),
//   ["summary"] (array of {metric, ours, paper}: the headline comparison),
//   ["tables"] (name -> {columns, rows}), plus experiment-specific fields (docs/experiments.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace svattn::experiments {

struct ExperimentOptions {
  /// "quick" (minutes on 2 cores), "paper" (the paper's scale where the data allow) or "tiny"
  /// (seconds; for tests).
  std::string preset = "quick";
  std::uint64_t seed = 20240601;
  std::string out_dir = "out/experiments";
  /// Data directory (--data-dir); empty = SVATTN_DATA or ../shared/data (see resolve_data_dir).
  std::string data_dir;
  /// E1: keys of a trained model (.npy or .csv, rows = tokens), e.g. from `svattn dump-keys`.
  /// Empty: the learned-keys row is reported as pending.
  std::string learned_keys;
  /// E1: restrict to these stream names (empty = the preset's streams).
  std::vector<std::string> streams;
  /// E1: trials per stream; E2: seeds (0 = the preset's value).
  int trials = 0;
  /// E5: training steps per run instead of the preset's (0 = the preset's value); warm-up and the
  /// validation interval scale with it. For runs between the quick and paper scales.
  std::int64_t steps = 0;
  /// Progress line on stderr.
  bool progress = true;
  /// Render PNG plots (data and gnuplot scripts are written either way).
  bool plots = true;

  /// Throws InvalidArgument for an unknown preset or a negative trial or step count.
  void validate() const;
};

/// "E1", "E2", "E4", and "E7" when the library was built with the store (svattn_store).
std::vector<std::string> experiment_ids();
/// One-line title of an experiment id.
std::string experiment_title(const std::string& id);

nlohmann::json run_e1(const ExperimentOptions& options);
nlohmann::json run_e2(const ExperimentOptions& options);
nlohmann::json run_e4(const ExperimentOptions& options);
/// E7 (e7.h): needs the store; without it (SVATTN_BUILD_STORE=OFF) throws InvalidArgument saying so.
nlohmann::json run_e7(const ExperimentOptions& options);
/// True when E7 is available in this build (the store was built).
bool e7_available();
/// Dispatches on id (case-insensitive "E1"/"e1"); throws InvalidArgument for an unknown id.
nlohmann::json run_experiment(const std::string& id, const ExperimentOptions& options);

/// E1 stream names known to run_e1 (any preset).
std::vector<std::string> e1_stream_names();

}  // namespace svattn::experiments
