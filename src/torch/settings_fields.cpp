// The field tables of the torch layers' settings (include/svattn/torch/settings_fields.h) and the
// checkpoint's model JSON derived from them (docs/lm.md "Training, checkpoints, resume").
#include "svattn/torch/settings_fields.h"

#include <cmath>

#include "svattn/errors.h"
#include "svattn/settings_fields.h"

namespace svattn::layers {
namespace {

using nlohmann::json;

std::vector<Field<BatchedSettings>> make_batched_fields() {
  using B = BatchedSettings;
  const double top = B::kMaxIterations;
  return {
      member_field<B>("iterations", &B::iterations, closed_range(1, top),
                      "FISTA iterations (fixed budget, no early exit)."),
      member_field<B>("solve_ridge", &B::solve_ridge, at_least(0),
                      "Ridge lambda added to K_SS + mu I in the coefficient solve."),
      member_field<B>("mask_tol", &B::mask_tol, open_range(0, 0.5),
                      "Reserve/error threshold of a FISTA coefficient, relative to the bound."),
      enum_field<B, LipschitzBound>("lipschitz", &B::lipschitz, &to_string, &lipschitz_bound_from_string,
                                    {"tangent", "power", "gershgorin"},
                                    "FISTA's Lipschitz bound: tangent | power (iteration) | gershgorin."),
      member_field<B>("power_iterations", &B::power_iterations, closed_range(1, top),
                      "Power iterations of the 'power' Lipschitz bound."),
      member_field<B>("bisections", &B::bisections, closed_range(0, 100),
                      "Bisection halvings of the projection's threshold (0: the dtype's default)."),
      member_field<B>("active_set_rounds", &B::active_set_rounds, closed_range(0, top),
                      "Active-set rounds of the repair of unsettled partitions (0: no check and repair)."),
      member_field<B>("ipm_iterations", &B::ipm_iterations, closed_range(0, top),
                      "Interior-point iterations of the repair."),
      member_field<B>("fp64", &B::fp64, {}, "Solve and read out in fp64 (else in the inputs' dtype)."),
  };
}

// The problem's rows: the core's, with the hybrid's docs.
std::vector<Field<HybridSettings>> hybrid_problem_rows() {
  const auto& core = problem_settings_fields();
  std::vector<Field<ProblemSettings>> rows;
  for (const auto& [name, doc] : {std::pair<const char*, const char*>{"C", "Box bound C of the SV memory."},
                                  {"kernel.bandwidth", "Initial per-head RBF bandwidth sigma."},
                                  {"ridge", "Ridge mu of the problem (both paths)."}}) {
    rows.push_back(*find_field(core, name));
    rows.back().doc = doc;
  }
  return nest_fields(rows, &HybridSettings::problem, "problem.");
}

std::vector<Field<HybridSettings>> make_hybrid_fields() {
  using H = HybridSettings;
  auto t = hybrid_problem_rows();
  const auto add = [&](Field<H> f) { t.push_back(std::move(f)); };
  add(member_field<H>("chunk", &H::chunk, at_least(1), "Chunk length L of the memory updates and the local path."));
  add(member_field<H>("local_window", &H::local_window, at_least(1),
                      "Window mode: W_loc, the fewest recent tokens the local path sees."));
  add(member_field<H>("gate_bias_init", &H::gate_bias_init, {}, "Initial gate bias a_h (0: a 0.5 split)."));
  add(enum_field<H, GlobalPath>("path", &H::path, &to_string, &global_path_from_string, {"exact", "batched"},
                                "Memory solver: exact (fp64 core, certified) | batched (FISTA + repair)."));
  add(enum_field<H, GateType>("gate", &H::gate, &to_string, &gate_type_from_string,
                              {"chunk", "token", "position", "joint"},
                              "Gate: chunk (the paper's) | token | position | joint (docs/layers.md §3)."));
  add(enum_field<H, LocalPath>("local", &H::local, &to_string, &local_path_from_string, {"chunk", "window"},
                               "Local path: chunk (the paper's) | window (sliding)."));
  add(member_field<H>("memory", &H::memory, {}, "Build the SV memory (false: the local path alone, an ablation)."));
  add(member_field<H>("learn_bandwidth", &H::learn_bandwidth, {}, "Per-head log sigma is a parameter."));
  add(member_field<H>("normalize_keys", &H::normalize_keys, {}, "L2-normalise the SV keys and queries."));
  add(member_field<H>("bounded", &H::bounded, {}, "Evict the reserve tokens at chunk boundaries."));
  add(member_field<H>("check_agreement", &H::check_agreement, {},
                      "Also solve every memory with the other path and report the agreement (slow)."));
  add(member_field<H>("certify", &H::certify, {}, "Exact path: check every memory with the verifier."));
  add(enum_field<H, ExactSolver>("exact_solver", &H::exact_solver, &to_string, &exact_solver_from_string,
                                 {"lean", "memory"}, "Exact path's solver: lean (training) | memory (the core)."));
  add(member_field<H>("count_distinct_support", &H::count_distinct_support, {},
                      "Count the distinct support keys of every memory (diagnostics)."));
  for (auto& f : nest_fields(batched_settings_fields(), &H::batched, "batched.")) t.push_back(std::move(f));
  return t;
}

std::vector<Field<AttentionConfig>> make_attention_own_fields() {
  using A = AttentionConfig;
  std::vector<Field<A>> t;
  t.push_back(enum_field<A, AttentionType>("type", &A::type, &to_string, &attention_type_from_string,
                                           {"softmax", "swa", "linear", "deltanet", "hybrid"}, "Attention module."));
  t.push_back(member_field<A>("d_model", &A::d_model, at_least(1), "Model width D."));
  t.push_back(member_field<A>("n_heads", &A::n_heads, FieldRange{1, INFINITY, false, false, {}, "a divisor of d_model"},
                              "Heads (the head dimension d_model / n_heads is even with rope)."));
  t.back().ok = [](const A& a) { return a.n_heads >= 1 && a.d_model % a.n_heads == 0; };
  t.push_back(member_field<A>("window", &A::window, at_least(1), "Sliding-window size W (swa)."));
  t.push_back(member_field<A>("scan_chunk", &A::scan_chunk, at_least(1),
                              "Chunk of the linear-attention and DeltaNet chunkwise forms."));
  t.push_back(member_field<A>("rope", &A::rope, {}, "Rotary positions on the softmax scores."));
  t.push_back(member_field<A>("rope_base", &A::rope_base, FieldRange{1, INFINITY, true, false, {}, "> 1"},
                              "Rotary base."));
  t.back().ok = [](const A& a) { return a.rope_base > 1; };
  return t;
}

std::vector<Field<LmConfig>> make_lm_own_fields() {
  using L = LmConfig;
  return {member_field<L>("vocab", &L::vocab, at_least(2), "Vocabulary size (256: bytes)."),
          member_field<L>("n_layers", &L::n_layers, at_least(1), "Transformer blocks."),
          member_field<L>("mlp_ratio", &L::mlp_ratio, at_least(1), "MLP width as a multiple of d_model."),
          member_field<L>("tied_head", &L::tied_head, {}, "The output head shares the embedding matrix."),
          member_field<L>("dropout", &L::dropout, half_open_range(0, 1), "Residual dropout.")};
}

// The JSON value at a dotted key, or nullptr.
const json* find_key(const json& j, const std::string& dotted) {
  const json* at = &j;
  std::size_t from = 0;
  while (true) {
    const std::size_t dot = dotted.find('.', from);
    const std::string part = dotted.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (!at->is_object() || !at->contains(part)) return nullptr;
    at = &(*at)[part];
    if (dot == std::string::npos) return at;
    from = dot + 1;
  }
}

void put_key(json& j, const std::string& dotted, json value) {
  json* at = &j;
  std::size_t from = 0, dot;
  while ((dot = dotted.find('.', from)) != std::string::npos) {
    at = &(*at)[dotted.substr(from, dot - from)];
    from = dot + 1;
  }
  (*at)[dotted.substr(from)] = std::move(value);
}

// Keys added after the first checkpoints: absent means the default.
bool may_be_absent(const std::string& key) {
  static const char* const kLater[] = {
      "attention.hybrid.local",           "attention.hybrid.local_window",       "attention.hybrid.memory",
      "attention.hybrid.count_distinct_support", "attention.hybrid.batched.bisections",
      "attention.hybrid.batched.active_set_rounds", "attention.hybrid.batched.ipm_iterations"};
  for (const char* k : kLater)
    if (key == k) return true;
  return false;
}

LmConfig read_lm_config(const json& j) {
  LmConfig c;
  for (const auto& f : lm_config_fields()) {
    const std::string key = lm_config_json_key(f.name);
    if (key.empty()) continue;
    const json* v = find_key(j, key);
    if (!v) {
      if (may_be_absent(key)) continue;
      throw FormatError("missing key '" + key + "'");
    }
    FieldSpec spec = f;
    spec.name = key;  // messages name the JSON key
    f.set(c, value_from_json(spec, *v));
  }
  const json* g = find_key(j, "attention.hybrid.gate_override");
  if (g && !g->is_null()) {
    if (!g->is_number()) throw FormatError("attention.hybrid.gate_override must be a number or null, got " + g->dump());
    c.attention.hybrid.gate_override = g->get<double>();
  }
  return c;
}

}  // namespace

std::string to_string(LipschitzBound b) {
  switch (b) {
    case LipschitzBound::kTangent: return "tangent";
    case LipschitzBound::kPowerIteration: return "power";
    case LipschitzBound::kGershgorin: return "gershgorin";
  }
  return "?";
}

LipschitzBound lipschitz_bound_from_string(const std::string& s) {
  if (s == "tangent") return LipschitzBound::kTangent;
  if (s == "power") return LipschitzBound::kPowerIteration;
  if (s == "gershgorin") return LipschitzBound::kGershgorin;
  throw InvalidArgument("lipschitz '" + s + "': expected tangent|power|gershgorin");
}

std::string to_string(ExactSolver s) { return s == ExactSolver::kLean ? "lean" : "memory"; }

ExactSolver exact_solver_from_string(const std::string& s) {
  if (s == "lean") return ExactSolver::kLean;
  if (s == "memory") return ExactSolver::kMemory;
  throw InvalidArgument("exact solver '" + s + "': expected lean|memory");
}

const std::vector<Field<BatchedSettings>>& batched_settings_fields() {
  static const auto t = make_batched_fields();
  return t;
}

const std::vector<Field<HybridSettings>>& hybrid_settings_fields() {
  static const auto t = make_hybrid_fields();
  return t;
}

const std::vector<Field<AttentionConfig>>& attention_config_own_fields() {
  static const auto t = make_attention_own_fields();
  return t;
}

const std::vector<Field<AttentionConfig>>& attention_config_fields() {
  static const auto t = [] {
    auto all = attention_config_own_fields();
    for (auto& f : nest_fields(hybrid_settings_fields(), &AttentionConfig::hybrid, "hybrid.")) all.push_back(std::move(f));
    return all;
  }();
  return t;
}

const std::vector<Field<LmConfig>>& lm_config_own_fields() {
  static const auto t = make_lm_own_fields();
  return t;
}

const std::vector<Field<LmConfig>>& lm_config_fields() {
  static const auto t = [] {
    auto all = lm_config_own_fields();
    for (auto& f : nest_fields(attention_config_fields(), &LmConfig::attention, "attention.")) all.push_back(std::move(f));
    return all;
  }();
  return t;
}

std::string lm_config_json_key(const std::string& field) {
  // The checkpoint's names of the problem's fields and of the solve ridge, from before the tables.
  static const std::pair<const char*, const char*> kRenamed[] = {
      {"attention.hybrid.problem.C", "attention.hybrid.C"},
      {"attention.hybrid.problem.kernel.bandwidth", "attention.hybrid.bandwidth"},
      {"attention.hybrid.problem.ridge", "attention.hybrid.mu"},
      {"attention.hybrid.batched.solve_ridge", "attention.hybrid.batched.ridge"},
      {"attention.hybrid.certify", ""},
      {"attention.hybrid.exact_solver", ""}};
  for (const auto& [from, to] : kRenamed)
    if (field == from) return to;
  return field;
}

json lm_config_to_json(const LmConfig& c) {
  json j = json::object();
  for (const auto& f : lm_config_fields()) {
    const std::string key = lm_config_json_key(f.name);
    if (!key.empty()) put_key(j, key, to_json(f.get(c)));
  }
  const auto& g = c.attention.hybrid.gate_override;
  put_key(j, "attention.hybrid.gate_override", g ? json(*g) : json(nullptr));
  return j;
}

LmConfig lm_config_from_json(const json& j) {
  try {
    LmConfig c = read_lm_config(j);
    c.validate();
    return c;
  } catch (const json::exception& e) {
    throw FormatError(std::string("model config JSON: ") + e.what());
  } catch (const FormatError& e) {
    throw FormatError(std::string("model config JSON: ") + e.what());
  }
}

}  // namespace svattn::layers
