// The field tables of the torch layers' settings (include/svattn/field_table.h): BatchedSettings,
// HybridSettings, AttentionConfig and LmConfig. Their validate(), the checkpoint's model JSON and
// the `svattn train --set model.…` keys (docs/lm.md "Training settings") are derived from them.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "svattn/field_table.h"
#include "svattn/torch/model.h"

namespace svattn::layers {

/// "tangent" | "power" | "gershgorin".
std::string to_string(LipschitzBound b);
/// Inverse of to_string(LipschitzBound); throws InvalidArgument otherwise.
LipschitzBound lipschitz_bound_from_string(const std::string& s);
/// "lean" | "memory".
std::string to_string(ExactSolver s);
/// Inverse of to_string(ExactSolver); throws InvalidArgument otherwise.
ExactSolver exact_solver_from_string(const std::string& s);

/// The batched solver's own fields: iterations, solve_ridge, mask_tol, lipschitz,
/// power_iterations, bisections, active_set_rounds, ipm_iterations, fp64 (problem and bounded are
/// the owner's: HybridSettings sets them).
const std::vector<Field<BatchedSettings>>& batched_settings_fields();
/// Every field of HybridSettings but gate_override (an optional, which a FieldValue cannot hold):
/// problem.C, problem.kernel.bandwidth, problem.ridge (the core's rows), chunk, local_window,
/// gate_bias_init, path, gate, local, memory, learn_bandwidth, normalize_keys, bounded,
/// check_agreement, certify, exact_solver, count_distinct_support, then batched.* (the solver's own
/// fields).
const std::vector<Field<HybridSettings>>& hybrid_settings_fields();
/// type, d_model, n_heads, window, scan_chunk, rope, rope_base.
const std::vector<Field<AttentionConfig>>& attention_config_own_fields();
/// The own fields, then hybrid.* (every row of hybrid_settings_fields()).
const std::vector<Field<AttentionConfig>>& attention_config_fields();
/// vocab, n_layers, mlp_ratio, tied_head, dropout.
const std::vector<Field<LmConfig>>& lm_config_own_fields();
/// The own fields, then attention.* (every row of attention_config_fields()).
const std::vector<Field<LmConfig>>& lm_config_fields();

/// The key of a row of lm_config_fields() in the checkpoint's model JSON, dotted
/// ("attention.hybrid.C" for attention.hybrid.problem.C), or "" for the rows the checkpoint does
/// not hold (attention.hybrid.certify and attention.hybrid.exact_solver: evaluation switches).
std::string lm_config_json_key(const std::string& field);
/// The checkpoint's model JSON (docs/lm.md "Training, checkpoints, resume"): one key per row with a JSON key, plus
/// attention.hybrid.gate_override (null when unset).
nlohmann::json lm_config_to_json(const LmConfig& c);
/// The inverse of lm_config_to_json, validated. Keys added after the first checkpoints may be
/// absent (the defaults: the chunk-local path, memory on, the repair stage's budgets, diagnostics
/// off). Throws FormatError "model config JSON: ..." naming a missing or mistyped key, and
/// InvalidArgument for a value out of range.
LmConfig lm_config_from_json(const nlohmann::json& j);

}  // namespace svattn::layers
