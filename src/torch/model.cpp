// Transformer block, character LM and parameter counting.
#include "svattn/torch/model.h"

#include <cmath>
#include <sstream>
#include <unordered_set>

#include "svattn/errors.h"
#include "svattn/torch/settings_fields.h"

namespace svattn::layers {

using torch::Tensor;

TransformerBlockImpl::TransformerBlockImpl(const AttentionConfig& attention, std::int64_t mlp_ratio,
                                           double dropout) {
  const auto D = attention.d_model;
  ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({D})));
  attn_ = register_module("attn", make_attention(attention));
  ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({D})));
  fc1_ = register_module("fc1", torch::nn::Linear(D, mlp_ratio * D));
  fc2_ = register_module("fc2", torch::nn::Linear(mlp_ratio * D, D));
  drop_ = register_module("drop", torch::nn::Dropout(dropout));
}

Tensor TransformerBlockImpl::forward(const Tensor& x) {
  Tensor h = x + drop_->forward(attn_->forward(ln1_->forward(x)));
  return h + drop_->forward(fc2_->forward(torch::gelu(fc1_->forward(ln2_->forward(h)))));
}

void LmConfig::validate() const {
  validate_fields(lm_config_own_fields(), *this, "model.");
  attention.validate();
}

CharLmImpl::CharLmImpl(const LmConfig& config) : config_(config) {
  config_.validate();
  const auto D = config_.attention.d_model;
  embed_ = register_module("embed", torch::nn::Embedding(config_.vocab, D));
  {
    torch::NoGradGuard ng;
    embed_->weight.normal_(0.0, 0.02);
  }
  for (std::int64_t i = 0; i < config_.n_layers; ++i)
    blocks_.push_back(
        register_module("block" + std::to_string(i),
                        TransformerBlock(config_.attention, config_.mlp_ratio, config_.dropout)));
  ln_f_ = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({D})));
  if (!config_.tied_head)
    head_ = register_module(
        "head", torch::nn::Linear(torch::nn::LinearOptions(D, config_.vocab).bias(false)));
}

Tensor CharLmImpl::forward(const Tensor& tokens) {
  if (tokens.dim() != 2) throw InvalidArgument("CharLm: tokens must be [B, T]");
  Tensor h = embed_->forward(tokens);
  for (auto& b : blocks_) h = b->forward(h);
  h = ln_f_->forward(h);
  return config_.tied_head ? torch::matmul(h, embed_->weight.t()) : head_->forward(h);
}

std::vector<AttentionDiagnostics> CharLmImpl::diagnostics() const {
  std::vector<AttentionDiagnostics> out;
  for (const auto& b : blocks_) out.push_back(b->attention().diagnostics());
  return out;
}

void CharLmImpl::set_record_diagnostics(bool on) {
  for (auto& b : blocks_) b->attention().set_record_diagnostics(on);
}

bool CharLmImpl::record_diagnostics() const {
  for (const auto& b : blocks_)
    if (!b->attention().record_diagnostics()) return false;
  return true;
}

std::int64_t count_parameters(const torch::nn::Module& module, bool trainable_only) {
  std::unordered_set<const void*> seen;
  std::int64_t n = 0;
  for (const auto& p : module.parameters(/*recurse=*/true)) {
    if (trainable_only && !p.requires_grad()) continue;
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    n += p.numel();
  }
  return n;
}

std::int64_t state_matched_window(std::int64_t local_width, double average_support) {
  if (local_width < 1) throw InvalidArgument("state_matched_window: local width must be >= 1");
  if (!std::isfinite(average_support) || average_support < 0)
    throw InvalidArgument("state_matched_window: average support must be finite and >= 0");
  return local_width + static_cast<std::int64_t>(std::llround(average_support));
}

}  // namespace svattn::layers
