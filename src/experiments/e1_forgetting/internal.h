// What E1's settings, measure, result and report units share (not installed): the fixed
// constants, the streams and deletion scenarios, the data a stream's trials share.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e1_forgetting/e1_forgetting.h"
#include "experiments/framework/data_dir.h"
#include "experiments/icu.h"
#include "svattn/types.h"

namespace svattn::experiments::e1_forgetting {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Settings, n, trials, streams, keys_model, keys_steps, keys_tokens)

inline constexpr double kNu = 0.1;             // C = 1 / (kNu n): >= 10 % of tokens carry weight
inline constexpr int kValueDim = 4;            // values ~ N(0, I_4), independent of the keys
inline constexpr int kRecordSize = 10;         // synthetic/learned "record" = 10 consecutive tokens
inline constexpr double kDecayFactor = 0.1;    // multiplicative-decay variant: alpha_D *= 0.1
inline constexpr int kProbesOnKeys = 32;       // probes: remaining keys ...
inline constexpr int kProbesAround = 32;       // ... and Gaussian probes around the data

struct StreamDef {
  std::string name;
  std::string kind;  // gaussian | clustered | near_duplicate | icu_mimic | icu_physionet2012 | learned
  int d = 0;         // 0 = given by the data
  std::string description;
};

/// Every stream E1 knows, in the report's order; the preset of a name; the stream of a name
/// (InvalidArgument naming the known ones otherwise) (settings.cpp).
const std::vector<StreamDef>& all_streams();
Settings preset_for(const std::string& name);
const StreamDef& stream_def(const std::string& name);

/// The deletion scenarios of a trial, in the report's order.
inline const std::vector<std::string> kScenarios = {"margin", "error", "reserve", "random_set", "record"};

/// Loaded data shared by the trials of a stream.
struct StreamData {
  std::optional<IcuKeys> icu;
  RowMatrix learned;
  std::string source;
};

/// Reads the data a stream's trials share. False, with the reason in `sum`, for the learned stream
/// without keys (pending) (trial.cpp).
bool load_stream_data(const StreamDef& def, const ExperimentOptions& o, const DataDir* data_dir,
                      const std::string& keys_error, StreamResult& sum, StreamData& data);
/// Trial `t` of a stream: ingests its tokens, then runs every applicable deletion scenario
/// (trial.cpp).
void run_trial(const StreamDef& def, const ExperimentOptions& o, const StreamData& data, int n_tokens,
               int t, StreamResult& sum, std::vector<double>& sigmas);

}  // namespace svattn::experiments::e1_forgetting
