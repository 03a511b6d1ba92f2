// Options of an experiment run and the `--set KEY=VALUE` overrides of its preset
// (docs/experiments.md "Presets and overrides"). A preset is data: each experiment exposes it as a
// flat JSON object (registry.h, Experiment::preset), and an override replaces one of its fields
// after checking that the key exists and that the value has the field's type; then every key is
// checked against its range (KeyRange, RangeTable; docs/experiments.md "Ranges of the `--set`
// keys").
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "svattn/errors.h"

namespace svattn::experiments {

/// A bad `--set` item: an unknown key, a value of the wrong type, or a malformed item. key() names
/// the offending key (as given, with its "E?." scope when it had one).
class SettingError : public InvalidArgument {
 public:
  SettingError(std::string key, const std::string& message)
      : InvalidArgument("--set " + key + ": " + message), key_(std::move(key)) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

/// One `--set` item: "[E?.]KEY=VALUE". VALUE is JSON (`0.25`, `true`, `[1,2,4]`, `"x"`) or, for a
/// string field, plain text; a list field also takes comma-separated items (`1,2,4`).
struct Override {
  std::string scope;  ///< "E3" for "E3.steps=10"; empty: the experiment being run
  std::string key;
  std::string value;  ///< as written
  /// The item as written ("E3.steps=10").
  std::string text() const;
};

/// Parses "KEY=VALUE" / "E?.KEY=VALUE"; throws SettingError for an item without '=' or key.
Override parse_override(const std::string& item);

/// `preset` (a flat JSON object) with every override whose scope is `id` (or empty) applied.
/// Throws SettingError naming the key for an unknown key or a value of another type than the
/// field's (integer, number, boolean, string, list of those).
nlohmann::json apply_overrides(nlohmann::json preset, const std::string& id,
                               const std::vector<Override>& overrides);

/// The allowed values of one preset key (docs/experiments.md "Ranges of the `--set` keys"):
/// a number, or each number of a list, in [min, max] (min excluded when min_open); a list's length
/// in [min_items, max_items]; a string, or each string of a list, one of `choices` (any string
/// when empty). A boolean key has no range beyond its type.
struct KeyRange {
  std::string key;
  double min = 0, max = 0;
  bool min_open = false;
  std::size_t min_items = 0, max_items = 0;
  std::vector<std::string> choices = {};
};

/// One experiment's ranges: one entry per preset key, and the checks between keys (`relations`,
/// e.g. a headline budget that must be one of the budgets), which throw through bad().
struct RangeTable {
  std::vector<KeyRange> keys;
  std::function<void(const std::string& id, const nlohmann::json& settings)> relations = {};
};

/// The one message of an out-of-range `--set` value: SettingError naming `field` (e.g.
/// "E2.patterns"): "--set E2.patterns: must be an integer in [1, 10000], got 0".
[[noreturn]] void bad(const std::string& field, const std::string& requirement,
                      const nlohmann::json& value);

/// Checks every key of `settings` (a preset after its overrides) against `table`, then the
/// relations; throws SettingError through bad(). A key without an entry is an internal error
/// (every preset key of E1 ... E7 has one; tested); a table without entries (an experiment a test
/// installs) checks nothing.
void check_ranges(const nlohmann::json& settings, const std::string& id, const RangeTable& table);

struct ExperimentOptions {
  /// "quick" (minutes on 2 cores), "paper" (the paper's scale where the data allow) or "tiny"
  /// (seconds; for tests).
  std::string preset = "quick";
  std::uint64_t seed = 20240601;
  std::string out_dir = "out/experiments";
  /// Data directory (--data-dir); empty = SVATTN_DATA or ../shared/data (see resolve_data_dir).
  std::string data_dir;
  /// E1: keys of a trained model (.npy or .csv, rows = tokens), e.g. from `svattn dump-keys`.
  /// Empty: E1 trains (or reuses) a small hybrid when this build has LibTorch (registry.h,
  /// learned-keys source) in the quick and paper presets; otherwise the row says why it is absent.
  std::string learned_keys;
  /// `--set` overrides of the presets (checked against every selected experiment before it runs);
  /// the experiment knobs among them, e.g. E1.streams, E1.trials, E2.seeds, E5.seeds, E5.steps
  /// (docs/experiments.md "Ranges of the `--set` keys").
  std::vector<Override> overrides;
  /// Progress line on stderr.
  bool progress = true;
  /// Render PNG plots (data and gnuplot scripts are written either way).
  bool plots = true;

  /// Throws InvalidArgument for an unknown preset or an empty output directory.
  void validate() const;
};

}  // namespace svattn::experiments
