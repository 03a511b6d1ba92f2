// E1's measurement: the learned keys and the data directory resolved, then every selected stream's
// trials.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "common.h"
#include "svattn/batch_solver.h"
#include "svattn/errors.h"
#include "experiments/e1_forgetting/e1_forgetting.h"
#include "experiments/registry.h"
#include "experiments/icu.h"
#include "experiments/report.h"
#include "experiments/streams.h"
#include "svattn/io.h"
#include "svattn/memory.h"
#include "svattn/readout.h"
#include "internal.h"

namespace svattn::experiments::e1_forgetting {
namespace {

StreamResult run_stream(const StreamDef& def, const ExperimentOptions& o, int n_tokens,
                        const DataDir* data_dir, int trials, const std::string& keys_error) {
  StreamResult sum;
  sum.name = def.name;
  sum.description = def.description;
  StreamData data;
  if (!load_stream_data(def, o, data_dir, keys_error, sum, data)) return sum;
  sum.trials = trials;
  const Stopwatch watch;
  Progress progress("E1 " + def.name, trials, "trials", o.progress);
  std::vector<double> sigmas;
  for (int t = 0; t < trials; ++t) {
    run_trial(def, o, data, n_tokens, t, sum, sigmas);
    progress.tick();
  }
  progress.finish();
  sum.sigma_median = median_of(sigmas);
  sum.seconds = watch.seconds();
  return sum;
}

/// The learned keys' file: options.learned_keys; else, when the learned stream is selected and
/// the preset trains (quick, paper), the file the LibTorch build's source trains or reuses
/// (registry.h); else empty. A failed training leaves it empty with the reason in `error` (the
/// other streams still run, e.g. without enwik8).
std::string learned_keys_for(const ExperimentOptions& o, const Result& res, std::string& error) {
  const auto& names = res.selected_streams;
  const bool wants_learned = std::find(names.begin(), names.end(), "learned") != names.end();
  if (!wants_learned || !o.learned_keys.empty() || res.settings.keys_steps <= 0 || !learned_keys_source())
    return o.learned_keys;
  LearnedKeysSpec spec;
  spec.model = res.settings.keys_model;
  spec.steps = res.settings.keys_steps;
  spec.tokens = std::max<std::int64_t>(res.settings.keys_tokens, res.settings.n);
  try {
    return learned_keys_source()(o, spec);
  } catch (const Error& e) {
    error = e.what();
    return "";
  }
}

/// The data directory when a selected stream reads ICU data.
std::optional<DataDir> icu_data_dir(const std::vector<std::string>& names, const ExperimentOptions& o) {
  for (const auto& nm : names) {
    const std::string kind = stream_def(nm).kind;
    if (kind == "icu_mimic" || kind == "icu_physionet2012") return resolve_data_dir(o.data_dir);
  }
  return std::nullopt;
}

}  // namespace

Result measure(const ExperimentOptions& options) {
  Result res;
  res.begin(options);
  res.settings = detail::with_overrides(preset_for(options.preset), kInfo.id, options);
  res.selected_streams = res.settings.streams;
  ExperimentOptions o = options;
  std::string keys_error;
  o.learned_keys = learned_keys_for(options, res, keys_error);
  res.learned_keys = o.learned_keys;
  res.trials = res.settings.trials;
  for (const auto& nm : res.selected_streams) stream_def(nm);  // validate names first
  ensure_dir(o.out_dir);  // reproductions go below it: fail before the trials, not after
  const std::optional<DataDir> data_dir = icu_data_dir(res.selected_streams, o);
  if (data_dir) {
    res.data_dir = data_dir->path;
    res.data_dir_source = data_dir->source;
  }
  for (const auto& nm : res.selected_streams) {
    res.streams.push_back(run_stream(stream_def(nm), o, res.settings.n, data_dir ? &*data_dir : nullptr,
                                     res.trials, keys_error));
  }
  res.end();
  return res;
}

ExperimentResult run(const ExperimentOptions& o) { return render(measure(o), o); }

}  // namespace svattn::experiments::e1_forgetting
