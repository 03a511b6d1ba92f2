// Presets and JSON round trip of the LM configs (TrainHyper's: src/lm/train_settings.cpp).
#include "svattn/lm/presets.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "svattn/errors.h"

namespace svattn::lm {

using layers::AttentionConfig;
using layers::AttentionType;
using layers::LmConfig;
using nlohmann::json;

namespace {

LmConfig base_model(std::int64_t d_model, std::int64_t n_layers, std::int64_t n_heads) {
  LmConfig m;
  m.vocab = 256;
  m.n_layers = n_layers;
  m.mlp_ratio = 4;
  m.tied_head = true;
  m.dropout = 0.0;
  m.attention.d_model = d_model;
  m.attention.n_heads = n_heads;
  m.attention.rope = true;
  m.attention.scan_chunk = 64;
  // Hybrid SV settings shared by every size (used only by type hybrid; the chunk also sets the
  // state-matched window).
  auto& h = m.attention.hybrid;
  h.chunk = 64;
  // The exact fp64 path trains: certified memories from the first step, and on trained keys a
  // step costs 0.6x the batched path's (docs/performance.md "Hybrid training paths"). The batched
  // FISTA path stays available (train --global-path batched) and keeps its settings below.
  h.path = layers::GlobalPath::kExact;
  h.gate = layers::GateType::kChunkFrozen;
  h.problem.C = 1.0 / 16;
  h.problem.kernel.bandwidth = 1.0;
  h.learn_bandwidth = true;
  h.normalize_keys = true;
  h.problem.ridge = 1e-6;
  h.batched.iterations = 100;
  h.batched.solve_ridge = 1e-3;
  return m;
}

TrainHyper base_train() {
  TrainHyper t;
  t.batch = 16;
  t.seq = 256;
  t.lr = 1e-3;
  t.warmup = 200;
  return t;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const char* size : {"400k", "800k", "3m", "10m"})
    for (const char* kind : {"hybrid", "hybrid-token", "hybrid-local", "hybrid-window", "hybrid-window-local",
                             "swa", "swa-window", "softmax", "linear", "deltanet"})
      out.push_back(std::string(kind) + "-" + size);
  out.emplace_back("tiny");
  out.emplace_back("tiny-swa");
  return out;
}

namespace {

[[noreturn]] void throw_unknown_preset(const std::string& name) {
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw InvalidArgument("unknown preset '" + name + "' (" + names + ")");
}

// The test models: "tiny" (hybrid on the batched path, so the trainer's tests cover that solver
// too; the exact path's training is tested with --global-path exact) and its state-matched window.
Preset tiny_preset(const std::string& name, double matched_support) {
  Preset p;
  p.name = name;
  p.model = base_model(32, 2, 2);
  p.model.attention.hybrid.chunk = 32;
  p.model.attention.hybrid.path = layers::GlobalPath::kBatched;
  p.model.attention.hybrid.batched.iterations = 30;
  p.model.attention.scan_chunk = 32;
  p.train.batch = 8;
  p.train.seq = 64;
  p.train.lr = 1e-2;
  p.train.warmup = 10;
  p.train.eval_every = 50;
  p.train.eval_windows = 8;
  p.train.checkpoint_every = 50;
  p.train.log_every = 1;
  if (name == "tiny") {
    p.model.attention.type = AttentionType::kHybrid;
    p.description = "test model: d 32, 2 layers, 2 heads, hybrid SV attention (chunk 32, 30 FISTA iterations)";
    return p;
  }
  // State-matched like swa-*: the tiny hybrid's chunk plus its average support (measured, or
  // given by --matched-support / --match-run).
  const double tiny_support = matched_support < 0 ? kDefaultTinyMatchedSupport : matched_support;
  p.model.attention.type = AttentionType::kSlidingWindow;
  p.model.attention.window = layers::state_matched_window(32, tiny_support);
  std::ostringstream os;
  os << "test model: d 32, 2 layers, 2 heads, state-matched sliding window " << p.model.attention.window
     << " = chunk 32 + average support " << tiny_support;
  p.description = os.str();
  return p;
}

// The model of a size suffix (400k, 800k, 3m, 10m).
LmConfig sized_model(const std::string& size, const std::string& name) {
  // E5's fair-geometry presets (docs/experiments.md "E5"): two layers, so that a state-matched
  // window sees at most 2 (W - 1) bytes back and cannot cover a 256-byte sequence.
  if (size == "400k") return base_model(128, 2, 4);
  if (size == "800k") return base_model(128, 4, 4);
  if (size == "3m") return base_model(256, 4, 4);
  if (size == "10m") return base_model(320, 8, 4);
  throw_unknown_preset(name);
}

// The hybrid kinds: chunk- or window-local, memory on or off, gate per head or per token.
void make_hybrid(const std::string& kind, const std::string& dims, Preset& p) {
  auto& a = p.model.attention;
  a.type = AttentionType::kHybrid;
  if (kind == "hybrid-token") a.hybrid.gate = layers::GateType::kPerToken;
  a.hybrid.memory = kind != "hybrid-local" && kind != "hybrid-window-local";
  std::string local = "chunk-local";
  if (a.hybrid.local == layers::LocalPath::kWindow)
    local = "sliding local >= " + std::to_string(a.hybrid.local_window) + " tokens";
  p.description = dims + ", hybrid SV attention (chunk " + std::to_string(a.hybrid.chunk) + ", " + local +
                  (a.hybrid.memory ? ", C 1/16, " + layers::to_string(a.hybrid.gate) + " gate)"
                                   : ", memory off: local path alone)");
}

// The baselines: the state-matched window, full softmax, linear attention, DeltaNet.
void make_baseline(const std::string& kind, const std::string& dims, double support, Preset& p) {
  auto& a = p.model.attention;
  if (kind == "swa" || kind == "swa-window") {
    a.type = AttentionType::kSlidingWindow;
    a.window = layers::state_matched_window(a.hybrid.local_width(), support);
    std::ostringstream os;
    os << dims << ", state-matched sliding window " << a.window << " = hybrid local width "
       << a.hybrid.local_width() << " + average support " << support;
    p.description = os.str();
  } else if (kind == "softmax") {
    a.type = AttentionType::kSoftmax;
    p.description = dims + ", full causal softmax";
  } else if (kind == "linear") {
    a.type = AttentionType::kLinear;
    p.description = dims + ", linear attention (elu + 1)";
  } else if (kind == "deltanet") {
    a.type = AttentionType::kDeltaNet;
    p.description = dims + ", DeltaNet (delta rule)";
  } else {
    throw_unknown_preset(p.name);
  }
}

}  // namespace

Preset make_preset(const std::string& name, double matched_support) {
  if (name == "tiny" || name == "tiny-swa") return tiny_preset(name, matched_support);
  const double support = matched_support < 0 ? kDefaultMatchedSupport : matched_support;
  Preset p;
  p.name = name;
  const auto dash = name.rfind('-');
  const std::string kind = dash == std::string::npos ? name : name.substr(0, dash);
  const std::string size = dash == std::string::npos ? "" : name.substr(dash + 1);
  p.model = sized_model(size, name);
  p.train = base_train();
  auto& a = p.model.attention;
  const std::string dims = "d " + std::to_string(a.d_model) + ", " + std::to_string(p.model.n_layers) +
                           " layers, " + std::to_string(a.n_heads) + " heads";
  // Window-mode kinds (docs/layers.md §3): the local path sees every token newer than the memory,
  // at least the last kWindowPresetLocal; swa-window is state-matched to them.
  if (kind == "hybrid-window" || kind == "hybrid-window-local" || kind == "swa-window") {
    a.hybrid.local = layers::LocalPath::kWindow;
    a.hybrid.local_window = kWindowPresetLocal;
  }
  if (kind == "hybrid" || kind == "hybrid-token" || kind == "hybrid-local" || kind == "hybrid-window" ||
      kind == "hybrid-window-local")
    make_hybrid(kind, dims, p);
  else
    make_baseline(kind, dims, support, p);
  return p;
}

double average_support_from_run(const std::string& run_dir) {
  const std::string path = (std::filesystem::path(run_dir) / "metrics.jsonl").string();
  std::ifstream in(path);
  if (!in) throw IoError("cannot open " + path + " (--match-run needs a hybrid run directory)");
  std::vector<double> per_record;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      throw FormatError(path + ": bad JSON line: " + e.what());
    }
    if (j.value("type", "") != "train" || !j.contains("layers")) continue;
    double sum = 0;
    int n = 0;
    for (const auto& l : j["layers"])
      if (l.contains("support_mean") && l["support_mean"].is_number()) {
        sum += l["support_mean"].get<double>();
        ++n;
      }
    if (n > 0) per_record.push_back(sum / n);
  }
  if (per_record.empty()) throw FormatError(path + ": no hybrid support sizes (is it a hybrid run?)");
  const std::size_t from = per_record.size() - std::max<std::size_t>(1, per_record.size() / 4);
  double sum = 0;
  for (std::size_t i = from; i < per_record.size(); ++i) sum += per_record[i];
  return sum / static_cast<double>(per_record.size() - from);
}

// ------------------------------------------------------------------ JSON

namespace {

const char* lipschitz_name(layers::LipschitzBound b) {
  switch (b) {
    case layers::LipschitzBound::kTangent: return "tangent";
    case layers::LipschitzBound::kPowerIteration: return "power";
    case layers::LipschitzBound::kGershgorin: return "gershgorin";
  }
  return "?";
}

layers::LipschitzBound lipschitz_from_name(const std::string& s) {
  if (s == "tangent") return layers::LipschitzBound::kTangent;
  if (s == "power") return layers::LipschitzBound::kPowerIteration;
  if (s == "gershgorin") return layers::LipschitzBound::kGershgorin;
  throw InvalidArgument("lipschitz '" + s + "': expected tangent|power|gershgorin");
}

}  // namespace

json to_json(const LmConfig& c) {
  const auto& a = c.attention;
  const auto& h = a.hybrid;
  json hj = {{"chunk", h.chunk},
             {"path", layers::to_string(h.path)},
             {"gate", layers::to_string(h.gate)},
             {"local", layers::to_string(h.local)},
             {"local_window", h.local_window},
             {"memory", h.memory},
             {"C", h.problem.C},
             {"bandwidth", h.problem.kernel.bandwidth},
             {"learn_bandwidth", h.learn_bandwidth},
             {"normalize_keys", h.normalize_keys},
             {"bounded", h.bounded},
             {"mu", h.problem.ridge},
             {"gate_bias_init", h.gate_bias_init},
             {"check_agreement", h.check_agreement},
             {"count_distinct_support", h.count_distinct_support},
             {"batched",
              {{"iterations", h.batched.iterations},
               {"ridge", h.batched.solve_ridge},
               {"mask_tol", h.batched.mask_tol},
               {"lipschitz", lipschitz_name(h.batched.lipschitz)},
               {"power_iterations", h.batched.power_iterations},
               {"bisections", h.batched.bisections},
               {"active_set_rounds", h.batched.active_set_rounds},
               {"ipm_iterations", h.batched.ipm_iterations},
               {"fp64", h.batched.fp64}}}};
  hj["gate_override"] = h.gate_override ? json(*h.gate_override) : json(nullptr);
  return {{"vocab", c.vocab},
          {"n_layers", c.n_layers},
          {"mlp_ratio", c.mlp_ratio},
          {"tied_head", c.tied_head},
          {"dropout", c.dropout},
          {"attention",
           {{"type", layers::to_string(a.type)},
            {"d_model", a.d_model},
            {"n_heads", a.n_heads},
            {"window", a.window},
            {"scan_chunk", a.scan_chunk},
            {"rope", a.rope},
            {"rope_base", a.rope_base},
            {"hybrid", hj}}}};
}

LmConfig lm_config_from_json(const json& j) {
  try {
    LmConfig c;
    c.vocab = j.at("vocab").get<std::int64_t>();
    c.n_layers = j.at("n_layers").get<std::int64_t>();
    c.mlp_ratio = j.at("mlp_ratio").get<std::int64_t>();
    c.tied_head = j.at("tied_head").get<bool>();
    c.dropout = j.at("dropout").get<double>();
    const auto& a = j.at("attention");
    auto& ac = c.attention;
    ac.type = layers::attention_type_from_string(a.at("type").get<std::string>());
    ac.d_model = a.at("d_model").get<std::int64_t>();
    ac.n_heads = a.at("n_heads").get<std::int64_t>();
    ac.window = a.at("window").get<std::int64_t>();
    ac.scan_chunk = a.at("scan_chunk").get<std::int64_t>();
    ac.rope = a.at("rope").get<bool>();
    ac.rope_base = a.at("rope_base").get<double>();
    const auto& h = a.at("hybrid");
    auto& hc = ac.hybrid;
    hc.chunk = h.at("chunk").get<std::int64_t>();
    hc.path = layers::global_path_from_string(h.at("path").get<std::string>());
    hc.gate = layers::gate_type_from_string(h.at("gate").get<std::string>());
    // Local-path options added after the first checkpoints: absent means the paper's chunk-local
    // path with the memory on.
    hc.local = layers::local_path_from_string(h.value("local", std::string("chunk")));
    hc.local_window = h.value("local_window", hc.local_window);
    hc.memory = h.value("memory", true);
    hc.problem.C = h.at("C").get<double>();
    hc.problem.kernel.bandwidth = h.at("bandwidth").get<double>();
    hc.learn_bandwidth = h.at("learn_bandwidth").get<bool>();
    hc.normalize_keys = h.at("normalize_keys").get<bool>();
    hc.bounded = h.at("bounded").get<bool>();
    hc.problem.ridge = h.at("mu").get<double>();
    hc.gate_bias_init = h.at("gate_bias_init").get<double>();
    hc.check_agreement = h.at("check_agreement").get<bool>();
    // A diagnostics switch added after the first checkpoints: absent means off.
    hc.count_distinct_support = h.value("count_distinct_support", false);
    if (h.contains("gate_override") && !h["gate_override"].is_null())
      hc.gate_override = h["gate_override"].get<double>();
    const auto& b = h.at("batched");
    hc.batched.iterations = b.at("iterations").get<int>();
    hc.batched.solve_ridge = b.at("ridge").get<double>();
    hc.batched.mask_tol = b.at("mask_tol").get<double>();
    hc.batched.lipschitz = lipschitz_from_name(b.at("lipschitz").get<std::string>());
    hc.batched.power_iterations = b.at("power_iterations").get<int>();
    // Absent in checkpoints written before the batched path's repair stage: the current defaults.
    hc.batched.bisections = b.value("bisections", hc.batched.bisections);
    hc.batched.active_set_rounds = b.value("active_set_rounds", hc.batched.active_set_rounds);
    hc.batched.ipm_iterations = b.value("ipm_iterations", hc.batched.ipm_iterations);
    hc.batched.fp64 = b.at("fp64").get<bool>();
    c.validate();
    return c;
  } catch (const json::exception& e) {
    throw FormatError(std::string("model config JSON: ") + e.what());
  }
}

}  // namespace svattn::lm
