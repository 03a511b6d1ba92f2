// The field tables of a training run: TrainHyper (validate, JSON) and the `--set` keys of
// `svattn train` (docs/lm.md "Training settings").
#include "svattn/lm/train_settings.h"

#include <cfloat>

#include "svattn/errors.h"
#include "svattn/torch/settings_fields.h"

namespace svattn::lm {

using layers::LmConfig;
using nlohmann::json;

namespace {

std::vector<Field<TrainHyper>> make_train_hyper_fields() {
  using H = TrainHyper;
  return {
      member_field<H>("batch", &H::batch, closed_range(1, H::kMaxBatch), "Sequences per step."),
      member_field<H>("seq", &H::seq, closed_range(2, H::kMaxSeq), "Tokens per sequence (targets per window)."),
      // The optimiser holds lr in fp32 (LibTorch AdamW): larger values cannot be represented.
      member_field<H>("lr", &H::lr, FieldRange{0, FLT_MAX, true, false, {}, "finite, > 0 and representable in fp32"},
                      "Peak learning rate (AdamW holds it in fp32)."),
      member_field<H>("min_lr_ratio", &H::min_lr_ratio, closed_range(0, 1), "Cosine floor as a fraction of lr."),
      member_field<H>("warmup", &H::warmup, at_least(0), "Linear warm-up steps (from lr / warmup)."),
      member_field<H>("weight_decay", &H::weight_decay, at_least(0), "AdamW weight decay of the matrices."),
      member_field<H>("gate_weight_decay", &H::gate_weight_decay, {},
                      "Also decay the hybrid gate's matrices (off: the gate is free)."),
      member_field<H>("beta1", &H::beta1, half_open_range(0, 1), "AdamW beta1."),
      member_field<H>("beta2", &H::beta2, half_open_range(0, 1), "AdamW beta2."),
      member_field<H>("eps", &H::eps, above(0), "AdamW epsilon."),
      member_field<H>("clip", &H::clip, {}, "Global gradient-norm clip (<= 0: off)."),
      member_field<H>("eval_every", &H::eval_every, at_least(0), "Validation period in steps (0: at the end only)."),
      member_field<H>("eval_windows", &H::eval_windows, at_least(0),
                      "Validation windows, evenly spaced (0: the whole split)."),
      member_field<H>("checkpoint_every", &H::checkpoint_every, at_least(0),
                      "Checkpoint period in steps (0: at the end only)."),
      member_field<H>("log_every", &H::log_every, at_least(1), "JSONL train record period in steps."),
  };
}

// The short keys of the hybrid attention, from before the model.* keys: each is its model.* row
// renamed (local_window also switches the local path to window mode).
void add_short_keys(std::vector<Field<RunSettings>>& t, const std::vector<Field<RunSettings>>& model) {
  const auto add = [&](const char* name, const char* row, const char* doc) -> Field<RunSettings>& {
    t.push_back(*find_field(model, std::string("model.attention.hybrid.") + row));
    t.back().name = name;
    t.back().doc = doc;
    return t.back();
  };
  add("gate", "gate", "Hybrid gate: chunk (the paper's) | token | position | joint (docs/layers.md §3).");
  add("local", "local", "Hybrid local path: chunk (the paper's) | window (sliding).");
  auto& window = add("local_window", "local_window",
                     "Hybrid window mode: W_loc, the fewest recent tokens seen locally (implies local window).");
  window.set = [set = window.set](RunSettings& r, const FieldValue& v) {
    set(r, v);
    r.model.attention.hybrid.local = layers::LocalPath::kWindow;
  };
  add("C", "problem.C", "Hybrid: box bound C of the SV memory.");
  add("chunk", "chunk", "Hybrid chunk length (swa: the chunk part of the window).");
  add("fista_iterations", "batched.iterations", "Hybrid: FISTA iterations of the batched path.");
  add("global_path", "path", "Hybrid memory solver: exact (fp64 core, certified) | batched (FISTA + repair).");
}

// The schedule, the short keys, the seed, then model.attention.hybrid.* for every hybrid field
// the checkpoint holds (include/svattn/torch/settings_fields.h).
std::vector<Field<RunSettings>> make_run_fields() {
  auto t = nest_fields(train_hyper_fields(), &RunSettings::train, "");
  const auto model = nest_fields(layers::lm_config_fields(), &RunSettings::model, "model.");
  add_short_keys(t, model);
  t.push_back(member_field<RunSettings>("seed", &RunSettings::seed, {},
                                        "Seed of the initialisation and of the batch order."));
  for (const auto& f : model)
    if (is_model_key(f.name) && !layers::lm_config_json_key(f.name.substr(6)).empty()) t.push_back(f);
  return t;
}

}  // namespace

const std::vector<Field<TrainHyper>>& train_hyper_fields() {
  static const auto t = make_train_hyper_fields();
  return t;
}

const std::vector<Field<RunSettings>>& run_settings_fields() {
  static const auto t = make_run_fields();
  return t;
}

const Field<RunSettings>& run_settings_field(const std::string& key) {
  if (const auto* f = find_field(run_settings_fields(), key)) return *f;
  throw InvalidArgument("--set " + key + ": unknown key (known: " + field_names(run_settings_fields()) + ")");
}

Setting parse_setting(const std::string& item) {
  const auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InvalidArgument("--set " + item + ": expected KEY=VALUE");
  const std::string key = item.substr(0, eq);
  return {key, parse_field(run_settings_field(key), item.substr(eq + 1))};
}

Setting make_setting(const std::string& key, const FieldValue& value) {
  const auto& f = run_settings_field(key);
  // The value as the field's type (an integer given for a number field is converted).
  RunSettings probe;
  f.set(probe, value);
  return {key, f.get(probe)};
}

bool is_model_key(const std::string& key) { return key.rfind("model.attention.hybrid.", 0) == 0; }

bool is_hybrid_key(const std::string& key, const std::string& field) {
  return key == field || key == "model.attention.hybrid." + field;
}

void check_model_setting(const std::string& key, const RunSettings& r) {
  if (is_model_key(key)) validate_fields(std::vector<Field<RunSettings>>{run_settings_field(key)}, r);
}

std::string setting_flag(const std::string& key) {
  if (key.find('.') != std::string::npos) return "--set " + key;  // no flag of its own
  std::string flag = "--" + key;
  for (auto& c : flag)
    if (c == '_') c = '-';
  return flag;
}

// ------------------------------------------------------------------ TrainHyper

void TrainHyper::validate() const {
  validate_fields(train_hyper_fields(), *this);
  if (batch * seq > kMaxStepTokens)
    bad_field("batch x seq", "<= " + std::to_string(kMaxStepTokens) + " tokens per step",
              std::to_string(batch * seq));
}

json to_json(const TrainHyper& h) { return fields_to_json(train_hyper_fields(), h); }

TrainHyper train_hyper_from_json(const json& j) {
  // Runs written before gate_weight_decay existed decayed the gate projection like every matrix.
  const auto absent = [](const std::string& key, FieldValue* v) {
    if (key != "gate_weight_decay") return false;
    *v = true;
    return true;
  };
  try {
    TrainHyper h = fields_from_json(train_hyper_fields(), j, TrainHyper{}, absent);
    h.validate();
    return h;
  } catch (const json::exception& e) {
    throw FormatError(std::string("train config JSON: ") + e.what());
  } catch (const FormatError& e) {
    throw FormatError(std::string("train config JSON: ") + e.what());
  }
}

}  // namespace svattn::lm
