// The settings of a training run as field tables (include/svattn/field_table.h): TrainHyper's
// fields and the `--set KEY=VALUE` keys of `svattn train`, from which its flags, the validation
// messages, the checkpoint's "train" JSON and the refusal of changed settings on --resume follow.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "svattn/field_table.h"
#include "svattn/lm/presets.h"

namespace svattn::lm {

inline constexpr std::uint64_t kDefaultSeed = 1234;

/// The fields of TrainHyper (name, type, range, doc); TrainHyper::validate, to_json(TrainHyper)
/// and train_hyper_from_json read them.
const std::vector<Field<TrainHyper>>& train_hyper_fields();

/// What a run's settings may change of its preset: the schedule, the hybrid attention's
/// settings, and the seed. The checkpoint holds every one of them.
struct RunSettings {
  TrainHyper train;
  layers::LmConfig model;
  std::uint64_t seed = kDefaultSeed;
};

/// The `--set` keys of a run: every TrainHyper field; the short keys gate, local, local_window, C,
/// chunk, fista_iterations and global_path of the hybrid attention; seed; then
/// model.attention.hybrid.NAME for every field of layers::hybrid_settings_fields() that the
/// checkpoint holds (include/svattn/torch/settings_fields.h; their ranges are the table's). The
/// keys without a dot are also flags of `svattn train` (--KEY with '-' for '_').
const std::vector<Field<RunSettings>>& run_settings_fields();

/// The row of run_settings_fields() named `key`; InvalidArgument listing the known keys.
const Field<RunSettings>& run_settings_field(const std::string& key);

/// One override of a run's settings.
struct Setting {
  std::string key;    ///< a name of run_settings_fields()
  FieldValue value;   ///< of the field's type
};

/// Parses "KEY=VALUE" (VALUE as the field's type: "16", "1e-3", "true", "token"). Throws
/// InvalidArgument naming the key.
Setting parse_setting(const std::string& item);
/// A Setting from a typed value (an integer is accepted for a number field); InvalidArgument for an
/// unknown key or a value of another type.
Setting make_setting(const std::string& key, const FieldValue& value);

/// Whether `key` is a model.attention.hybrid.* key (checked against its range when a new run sets it).
bool is_model_key(const std::string& key);
/// Whether `key` sets the hybrid field `field`: its short key or model.attention.hybrid.FIELD.
bool is_hybrid_key(const std::string& key, const std::string& field);
/// For a model.attention.hybrid.* key: throws InvalidArgument "KEY must be <requirement>, got
/// <value>" when its value in `r` is outside the table's range (a short key is left to
/// LmConfig::validate, whose messages name the struct's field).
void check_model_setting(const std::string& key, const RunSettings& r);

/// The command-line flag of a key: "--eval-every" for eval_every; "--set KEY" for a dotted key.
std::string setting_flag(const std::string& key);

}  // namespace svattn::lm
