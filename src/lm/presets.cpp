// Presets and JSON round trip of the LM configs (TrainHyper's: src/lm/train_settings.cpp).
#include "svattn/lm/presets.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "svattn/errors.h"
#include "svattn/torch/settings_fields.h"

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

// The model JSON is the torch layers' field tables' (include/svattn/torch/settings_fields.h).
json to_json(const LmConfig& c) { return layers::lm_config_to_json(c); }

LmConfig lm_config_from_json(const json& j) { return layers::lm_config_from_json(j); }

}  // namespace svattn::lm
