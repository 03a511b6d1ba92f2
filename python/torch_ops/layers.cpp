// TORCH_LIBRARY_FRAGMENT(svattn, ...): ops layer_forward and layer_certify, the C++ attention
// layers of include/svattn/torch/attention.h built from a config and run on given weights
// (docs/python.md "Parity with the C++ layers", "Certified inference"). svattn.torch.reference
// checks the Python modules against layer_forward and runs Python-trained weights through the C++
// layer; svattn.torch.certify_inference reports a hybrid layer's certificates through
// layer_certify. InvalidArgument surfaces as ValueError.
#include <torch/library.h>
#include <torch/torch.h>

#include <set>
#include <string>

#include "svattn/errors.h"
#include "svattn/torch/attention.h"
#include "svattn/torch/batched.h"
#include "svattn/torch/settings_fields.h"

namespace svattn::python {

namespace {

using torch::Tensor;
using Numbers = c10::Dict<std::string, double>;
using Texts = c10::Dict<std::string, std::string>;

double number(const Numbers& n, std::set<std::string>& used, const std::string& key, double dflt) {
  used.insert(key);
  return n.contains(key) ? n.at(key) : dflt;
}

// The key of a row of layers::hybrid_settings_fields() in the flat config: its last name
// ("problem.kernel.bandwidth" -> "bandwidth", "batched.iterations" -> "iterations").
std::string flat_key(const std::string& field) { return field.substr(field.rfind('.') + 1); }

// The hybrid settings from the flat numbers and texts (keys as in the Python HybridSettings), one
// per row of the hybrid table (include/svattn/torch/settings_fields.h): a text row from `t`, the
// others from `n` (a bool is a number != 0). gate_override (an optional) by hand.
void read_hybrid(const Numbers& n, const Texts& t, std::set<std::string>& used,
                 layers::HybridSettings& h) {
  for (const auto& f : layers::hybrid_settings_fields()) {
    const std::string key = flat_key(f.name);
    if (f.type == FieldType::kText) {
      if (t.contains(key)) f.set(h, FieldValue(std::string(t.at(key))));
      continue;
    }
    if (!n.contains(key)) continue;
    const double x = number(n, used, key, 0);
    if (f.type == FieldType::kBool) f.set(h, FieldValue(x != 0));
    else if (f.type == FieldType::kNumber) f.set(h, FieldValue(x));
    else f.set(h, FieldValue(static_cast<std::int64_t>(x)));
  }
  if (n.contains("gate_override")) h.gate_override = number(n, used, "gate_override", 0);
  used.insert("gate_override");
}

// Whether `key` is a text row of the hybrid table.
bool hybrid_text_key(const std::string& key) {
  for (const auto& f : layers::hybrid_settings_fields())
    if (f.type == FieldType::kText && flat_key(f.name) == key) return true;
  return false;
}

layers::AttentionConfig read_config(const std::string& type, const Numbers& n, const Texts& t) {
  layers::AttentionConfig c;
  std::set<std::string> used;
  auto num = [&](const char* k, double d) { return number(n, used, k, d); };
  c.type = layers::attention_type_from_string(type);
  c.d_model = static_cast<std::int64_t>(num("hidden_size", static_cast<double>(c.d_model)));
  c.n_heads = static_cast<std::int64_t>(num("num_heads", static_cast<double>(c.n_heads)));
  c.window = static_cast<std::int64_t>(num("window", static_cast<double>(c.window)));
  c.scan_chunk = static_cast<std::int64_t>(num("scan_chunk", static_cast<double>(c.scan_chunk)));
  c.rope = num("rope", c.rope) != 0;
  c.rope_base = num("rope_base", c.rope_base);
  read_hybrid(n, t, used, c.hybrid);
  for (const auto& kv : n)
    if (!used.count(kv.key())) throw InvalidArgument("config: unknown key '" + kv.key() + "'");
  for (const auto& kv : t)
    if (!hybrid_text_key(kv.key()))
      throw InvalidArgument("config: unknown key '" + kv.key() + "'");
  return c;
}

// Copies `state` into the module's parameters and buffers; every name must match both ways.
void load_state(torch::nn::Module& m, const c10::Dict<std::string, Tensor>& state) {
  torch::NoGradGuard no_grad;
  std::set<std::string> seen;
  auto copy = [&](const std::string& name, Tensor& dst) {
    if (!state.contains(name)) throw InvalidArgument("state: missing '" + name + "'");
    const Tensor src = state.at(name);
    if (src.sizes() != dst.sizes())
      throw InvalidArgument("state: '" + name + "' has the wrong shape");
    dst.copy_(src);
    seen.insert(name);
  };
  for (auto& p : m.named_parameters()) copy(p.key(), p.value());
  for (auto& b : m.named_buffers()) copy(b.key(), b.value());
  for (const auto& kv : state)
    if (!seen.count(kv.key())) throw InvalidArgument("state: unexpected '" + kv.key() + "'");
}

Tensor layer_forward(const std::string& type, const Numbers& numbers, const Texts& texts,
                     const c10::Dict<std::string, Tensor>& state, const Tensor& x) {
  try {
    auto layer = layers::make_attention(read_config(type, numbers, texts));
    layer->to(x.scalar_type());
    load_state(*layer, state);
    torch::NoGradGuard no_grad;
    return layer->forward(x);
  } catch (const InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

// A hybrid layer run on the exact path with every memory's state checked by the independent
// verifier (HybridSettings::certify), and, with `agreement`, also solved on the batched path
// (check_agreement): its diagnostics, as `svattn-torch eval --global-path exact --certify`
// reports them per layer.
c10::Dict<std::string, double> layer_certify(const Numbers& numbers, const Texts& texts,
                                             const c10::Dict<std::string, Tensor>& state,
                                             const Tensor& x, bool agreement) {
  try {
    layers::AttentionConfig c = read_config("hybrid", numbers, texts);
    c.hybrid.path = layers::GlobalPath::kExact;
    c.hybrid.certify = true;
    c.hybrid.check_agreement = agreement;
    auto layer = layers::make_attention(c);
    layer->to(x.scalar_type());
    load_state(*layer, state);
    layer->set_record_diagnostics(true);  // the support summaries below
    torch::NoGradGuard no_grad;
    layer->forward(x);
    const layers::AttentionDiagnostics& d = layer->diagnostics();
    c10::Dict<std::string, double> out;
    out.insert("support_mean", d.support_mean);
    for (std::size_t h = 0; h < d.support_per_head.size(); ++h)
      out.insert("support_head_" + std::to_string(h), d.support_per_head[h]);
    out.insert("gate_mean", d.gate_mean);
    out.insert("certified_units", static_cast<double>(d.certified_units));
    out.insert("verified_units", static_cast<double>(d.verified_units));
    if (agreement) {
      out.insert("partition_agreement", d.partition_agreement);
      out.insert("agreement_units", static_cast<double>(d.agreement_units));
      out.insert("coefficient_error", d.coefficient_error);
    }
    return out;
  } catch (const InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

}  // namespace

}  // namespace svattn::python

TORCH_LIBRARY_FRAGMENT(svattn, m) {
  m.def(
      "layer_forward(str type, Dict(str, float) numbers, Dict(str, str) texts, "
      "Dict(str, Tensor) state, Tensor x) -> Tensor",
      &svattn::python::layer_forward);
  m.def(
      "layer_certify(Dict(str, float) numbers, Dict(str, str) texts, Dict(str, Tensor) state, "
      "Tensor x, bool agreement) -> Dict(str, float)",
      &svattn::python::layer_certify);
}
