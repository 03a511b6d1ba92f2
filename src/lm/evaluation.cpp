// Bits per byte of a character LM over fixed windows, and the learned keys of one attention head.
#include "svattn/lm/evaluation.h"

#include <algorithm>

#include "step.h"
#include "support/clock.h"
#include "svattn/errors.h"

namespace svattn::lm {

using torch::Tensor;

namespace {

// Adds one forward's diagnostics to the running sums (maxima for residuals and errors; the
// agreement weighted by its units).
void accumulate(layers::AttentionDiagnostics& acc, const layers::AttentionDiagnostics& d) {
  acc.support_mean += d.support_mean;
  acc.gate_mean += d.gate_mean;
  acc.solver_seconds += d.solver_seconds;
  for (std::size_t h = 0; h < d.support_per_head.size() && h < acc.support_per_head.size(); ++h)
    acc.support_per_head[h] += d.support_per_head[h];
  acc.fista_residual = std::max(acc.fista_residual, d.fista_residual);
  acc.negative_coefficients += d.negative_coefficients;
  acc.certified_units += d.certified_units;
  acc.verified_units += d.verified_units;
  if (std::isfinite(d.partition_agreement)) {
    const long units = acc.agreement_units + d.agreement_units;
    if (units > 0)
      acc.partition_agreement = (acc.partition_agreement * static_cast<double>(acc.agreement_units) +
                                 d.partition_agreement * static_cast<double>(d.agreement_units)) /
                                static_cast<double>(units);
    acc.agreement_units = units;
    acc.coefficient_error = std::max(acc.coefficient_error, d.coefficient_error);
  }
}

// The sums of `forwards` forwards as means.
std::vector<layers::AttentionDiagnostics> averaged(std::vector<layers::AttentionDiagnostics> acc, int forwards) {
  for (auto& a : acc) {
    a.support_mean /= forwards;
    a.gate_mean /= forwards;
    for (auto& v : a.support_per_head) v /= forwards;
  }
  return acc;
}

}  // namespace

EvalResult evaluate(layers::CharLm& model, const Corpus& corpus, const EvalOptions& options) {
  if (options.seq < 2) throw InvalidArgument("evaluate: seq must be >= 2, got " + std::to_string(options.seq));
  if (options.batch < 1) throw InvalidArgument("evaluate: batch must be >= 1");
  const support::Stopwatch clock;
  const auto offsets = eval_offsets(corpus, options.split, options.seq, options.windows);
  torch::NoGradGuard ng;
  const bool was_training = model->is_training();
  const bool was_recording = model->record_diagnostics();
  model->eval();
  model->set_record_diagnostics(true);  // the result reports every layer's diagnostics
  EvalResult r;
  r.seq = options.seq;
  r.windows = static_cast<std::int64_t>(offsets.size());
  double nll_sum = 0;
  std::vector<layers::AttentionDiagnostics> acc;
  int forwards = 0;
  const auto B = static_cast<std::size_t>(options.batch);
  for (std::size_t i = 0; i < offsets.size(); i += B) {
    const std::vector<std::int64_t> part(offsets.begin() + static_cast<std::ptrdiff_t>(i),
                                         offsets.begin() + static_cast<std::ptrdiff_t>(std::min(offsets.size(), i + B)));
    Tensor w = detail::window_tensor(corpus, part, options.seq).to(detail::model_device(model));
    Tensor x = w.narrow(1, 0, options.seq), y = w.narrow(1, 1, options.seq);
    Tensor logits = model->forward(x);
    Tensor loss = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}).to(torch::kFloat64), y.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    nll_sum += loss.item<double>();
    r.targets += y.numel();
    const auto d = model->diagnostics();
    if (forwards++ == 0)
      acc = d;
    else
      for (std::size_t l = 0; l < d.size(); ++l) accumulate(acc[l], d[l]);
  }
  r.diagnostics = averaged(std::move(acc), std::max(forwards, 1));
  if (was_training) model->train();
  model->set_record_diagnostics(was_recording);
  r.nll = nll_sum / static_cast<double>(r.targets);
  r.bpc = r.nll / detail::kLn2;
  r.seconds = clock.seconds();
  return r;
}

namespace {

// The input of layer `layer`'s attention: the embedding through the blocks before it, then ln1.
Tensor attention_input(layers::CharLm& model, const Tensor& tokens, std::int64_t layer) {
  auto mods = model->named_modules("", /*include_self=*/false);
  auto get = [&](const std::string& name) {
    if (!mods.contains(name)) throw InvalidArgument("learned_keys: model has no module " + name);
    return mods[name];
  };
  Tensor h = get("embed")->as<torch::nn::EmbeddingImpl>()->forward(tokens.unsqueeze(0));
  for (std::int64_t l = 0; l < layer; ++l)
    h = get("block" + std::to_string(l))->as<layers::TransformerBlockImpl>()->forward(h);
  return get("block" + std::to_string(layer) + ".ln1")->as<torch::nn::LayerNormImpl>()->forward(h);
}

// One head of `proj` ("k_proj", "v_proj") of layer `layer`'s attention applied to x: [T, dh].
Tensor head_projection(layers::CharLm& model, const Tensor& x, std::int64_t layer, std::int64_t head,
                       const char* proj) {
  const auto& cfg = model->config();
  const auto H = cfg.attention.n_heads, dh = cfg.attention.d_model / H;
  const std::string name = "block" + std::to_string(layer) + ".attn." + proj;
  auto mods = model->named_modules("", /*include_self=*/false);
  if (!mods.contains(name)) throw InvalidArgument("learned_keys: model has no module " + name);
  Tensor y = mods[name]->as<torch::nn::LinearImpl>()->forward(x);
  return y.view({x.size(1), H, dh}).select(1, head);
}

}  // namespace

LayerKeys learned_keys(layers::CharLm& model, const Tensor& tokens, std::int64_t layer, std::int64_t head) {
  const auto& cfg = model->config();
  if (layer < 0 || layer >= cfg.n_layers)
    throw InvalidArgument("--layer " + std::to_string(layer) + " out of range [0, " + std::to_string(cfg.n_layers) + ")");
  const auto H = cfg.attention.n_heads;
  if (head < 0 || head >= H)
    throw InvalidArgument("--head " + std::to_string(head) + " out of range [0, " + std::to_string(H) + ")");
  if (tokens.dim() != 1 || tokens.size(0) < 1) throw InvalidArgument("learned_keys: tokens must be [T], T >= 1");
  torch::NoGradGuard ng;
  model->eval();
  const Tensor x = attention_input(model, tokens, layer);
  LayerKeys out;
  Tensor k = head_projection(model, x, layer, head, "k_proj");
  const auto& hs = cfg.attention.hybrid;
  if (cfg.attention.type == layers::AttentionType::kHybrid) {
    out.C = hs.problem.C;
    out.mu = hs.problem.ridge;
    out.normalized = hs.normalize_keys;
    if (hs.normalize_keys)
      k = torch::nn::functional::normalize(k, torch::nn::functional::NormalizeFuncOptions().dim(-1).eps(1e-6));
    auto params = model->named_parameters(/*recurse=*/true);
    auto buffers = model->named_buffers(/*recurse=*/true);
    const std::string ls = "block" + std::to_string(layer) + ".attn.log_sigma";
    Tensor lsig = params.contains(ls) ? params[ls] : buffers.contains(ls) ? buffers[ls] : Tensor();
    out.bandwidth = lsig.defined() ? std::exp(lsig[head].item<double>()) : hs.problem.kernel.bandwidth;
  }
  out.keys = k.to(torch::kFloat64).contiguous();
  out.values = head_projection(model, x, layer, head, "v_proj").to(torch::kFloat64).contiguous();
  return out;
}

}  // namespace svattn::lm
