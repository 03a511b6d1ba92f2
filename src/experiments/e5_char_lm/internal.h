// What E5's settings, measure, result and report units share (not installed): the JSON of the
// settings and pairs and the preset table.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "experiments/e5_char_lm/e5_char_lm.h"

namespace svattn::experiments::e5_char_lm {

// With defaults: results written before a key existed still read (absent = the default).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Pair, hybrid, swa, reference, gate, ablation)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Settings, corpus, pairs, seeds, seeds_every_pair, steps,
                                                batch, seq, warmup, eval_every, eval_windows,
                                                test_windows, chunk, local_window, note, device,
                                                max_seconds, lr, workers)

/// One run as JSON (the typed result's and the report's `pairs`).
nlohmann::json run_json(const Run& r);

/// The preset of a name (tiny | quick | cpu | paper) before `--set`.
Settings e5_preset(const std::string& name);

/// `--set E5.steps=N` on `p` (the preset after `--set`, whose steps were `preset_steps`): warm-up
/// and validation interval scale by N / preset_steps (rounded, at least 1) unless `--set` gives
/// them too, and the note says so. Returns the suffix of the runs' directories, "-stepsN", so a
/// run of another length is never resumed; without the override nothing changes and it is "".
/// (docs/experiments.md "Ranges of the `--set` keys")
std::string scale_to_steps(Settings& p, std::int64_t preset_steps, const ExperimentOptions& o);

}  // namespace svattn::experiments::e5_char_lm
