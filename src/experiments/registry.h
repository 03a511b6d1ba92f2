// The one registry of the paper's experiments (docs/experiments.md): E1 ... E7 in order, each with
// its title, the paper's result, its presets as data and its runner. E1, E2, E4 and E7 are built
// into svattn_experiments (E7 only with the store); E3, E5 and E6 need LibTorch and are installed
// by svattn_experiments_torch (install_torch_experiments, torch_experiments.h) -- without it they
// are listed and say what they need. `svattn experiment` and `svattn reproduce` dispatch here.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "experiments/options.h"
#include "experiments/result.h"

namespace svattn::experiments {

using Runner = std::function<ExperimentResult(const ExperimentOptions&)>;
/// Writes an experiment's report (E?.md, E?.json, plots) into options.out_dir from the typed result
/// held by an earlier run's E?.json (`file`), without running anything.
using Renderer =
    std::function<ExperimentResult(const nlohmann::json& file, const ExperimentOptions& options)>;
/// The preset of a name ("tiny" | "quick" | "paper") as a flat JSON object (the `--set` keys).
using PresetTable = std::function<nlohmann::json(const std::string& preset)>;

struct Experiment {
  std::string id;
  std::string title;
  std::string paper_result;
  /// What the experiment needs when this build cannot run it (the report's reason).
  std::string needs;
  Runner run;           ///< empty: not available in this build
  PresetTable presets;  ///< empty when run is
  /// Presets beyond tiny / quick / paper that only this experiment has (E3 and E5: "cpu").
  std::vector<std::string> extra_presets = {};
  Renderer render_file = {};  ///< empty when run is
  /// The range of every preset key, checked before anything runs (check_overrides).
  RangeTable ranges = {};
  bool available() const { return static_cast<bool>(run); }
  bool has_preset(const std::string& name) const;
};

/// E1 ... E7 in order.
const std::vector<Experiment>& all_experiments();
/// The entry of an id (case-insensitive "E3" / "e3"); throws InvalidArgument for another id.
const Experiment& find_experiment(const std::string& id);
/// Ids of the experiments this build can run.
std::vector<std::string> experiment_ids();

/// Makes `id` runnable (replaces its runner and presets); throws InvalidArgument for an unknown id
/// or an empty runner. Used by install_torch_experiments and by tests.
void install_experiment(const std::string& id, Runner run, PresetTable presets,
                        Renderer render_file = {}, RangeTable ranges = {});
/// Makes `id` unavailable again (tests).
void uninstall_experiment(const std::string& id);

/// Checks options.validate() and every override against the presets of the experiments `ids`
/// before anything runs: a scoped override of an id outside `ids` or of an unavailable
/// experiment, an unknown key, a value of another type or out of the key's range (Experiment::
/// ranges) throws SettingError naming the key; a preset that
/// one of `ids` does not have throws InvalidArgument naming both.
void check_overrides(const ExperimentOptions& options, const std::vector<std::string>& ids);

/// Runs one experiment (check_overrides first); throws InvalidArgument for an unknown id or one
/// this build cannot run (saying what it needs).
ExperimentResult run_experiment(const std::string& id, const ExperimentOptions& options);

/// Renders the report of `id` again from the E?.json at `path` (an earlier run's, with its typed
/// result) into options.out_dir: the same E?.md and tables, without training, solving or reading
/// data. IoError when the file cannot be read; FormatError naming the file when it is not JSON, is
/// another experiment's or lacks a field (nothing is written then); InvalidArgument for an id this
/// build cannot render.
ExperimentResult render_experiment_file(const std::string& id, const std::string& path,
                                        const ExperimentOptions& options);

/// What E1 asks of its learned-keys source (E1's preset fields keys_*).
struct LearnedKeysSpec {
  std::string model = "tiny";  ///< LM preset of the hybrid trained for its keys
  std::int64_t steps = 300;    ///< training steps
  std::int64_t tokens = 2048;  ///< consecutive validation bytes whose keys are dumped
  std::int64_t layer = 0;
  std::int64_t head = 0;
};
/// E1's learned-keys source: returns the path of a keys file (.npy, rows = tokens) of a hybrid
/// trained on the enwik8 prefix, reusing the one cached under <out_dir>/E1-keys/ when its spec and
/// seed match. Installed by svattn_experiments_torch; without it E1 reports the learned-keys row
/// as needing LibTorch or --learned-keys.
using LearnedKeysSource =
    std::function<std::string(const ExperimentOptions&, const LearnedKeysSpec&)>;
void install_learned_keys_source(LearnedKeysSource source);
const LearnedKeysSource& learned_keys_source();

}  // namespace svattn::experiments
