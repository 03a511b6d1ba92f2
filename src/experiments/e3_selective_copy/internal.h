// What E3's settings, measure, result and report units share (not installed): the methods
// compared, the model configuration of a method and the support means.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/e3_selective_copy/e3_selective_copy.h"
#include "experiments/options.h"
#include "experiments/report.h"
#include "svattn/torch/model.h"

namespace svattn::experiments::e3_selective_copy {

struct Method {
  std::string name;  // hybrid | swa | linear | deltanet | softmax
  std::string label;
  layers::AttentionType type;
};

/// Every method, in the order of the report's rows.
inline const std::vector<Method> kMethods = {
    {"hybrid", "hybrid SV", layers::AttentionType::kHybrid},
    {"swa", "sliding window (state-matched)", layers::AttentionType::kSlidingWindow},
    {"linear", "linear attention", layers::AttentionType::kLinear},
    {"deltanet", "DeltaNet", layers::AttentionType::kDeltaNet},
    {"softmax", "full causal softmax (reference, unbounded state)",
     layers::AttentionType::kSoftmax},
};

/// The method of a name; InvalidArgument for another name.
const Method& method_named(const std::string& name);
inline const Method& method_of(const MethodResult& r) { return method_named(r.method); }

/// The preset of a name (tiny | quick | cpu | paper) before `--set`.
Settings preset_settings(const std::string& name);
/// InvalidArgument when the settings cannot run.
void validate_preset(const Settings& p);

/// The CharLm configuration of a method (settings.cpp's fields, the matched window and heads).
layers::LmConfig model_config(const Settings& p, layers::AttentionType type, std::int64_t window,
                              std::int64_t recurrent_heads = 1);
/// The configuration a method was trained with, from the settings and what the result records.
layers::LmConfig config_of(const Settings& p, const MethodResult& r);
/// Mean over layers and heads of a [layer][head] table (NaN when empty); of an evaluation's support.
double mean_of_layers(const std::vector<std::vector<double>>& per_layer_head);
double mean_support(const EvalPoint& e);
/// Trains and evaluates every method of one seed.
SeedRuns train_all(const Settings& p, const ExperimentOptions& o, std::uint64_t seed);

/// `value` of method `name`'s evaluation at padding index `fi`, one per seed (seeds without the
/// method are skipped); recall_of is the usual `value` (report_seeds.cpp).
std::vector<double> over_seeds(const std::vector<SeedRuns>& all, const std::string& name,
                               std::size_t fi,
                               const std::function<double(const EvalPoint&)>& value);
double recall_of(const EvalPoint& e);
/// The cell of values over seeds: "mean ± sd (each seed's)", the value alone for one seed.
std::string seeds_cell(const std::vector<double>& v, int digits);
/// Recall and support over seeds, and the recall of every seed (report_seeds.cpp).
Table seeds_recall_table(const Settings& p, const std::vector<SeedRuns>& all);
Table per_seed_recall_table(const Settings& p, const std::vector<SeedRuns>& all);
Table seeds_support_table(const Settings& p, const std::vector<SeedRuns>& all);

}  // namespace svattn::experiments::e3_selective_copy
