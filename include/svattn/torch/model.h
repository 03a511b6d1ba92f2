// Pre-norm transformer block and a character-level LM, parameterised by the attention config so
// that experiments swap only the attention (docs/layers.md §3–§11).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "svattn/torch/attention.h"

namespace svattn::layers {

/// x + attn(LN(x)), then x + MLP(LN(x)) with a GELU MLP of width mlp_ratio * d_model.
class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(const AttentionConfig& attention, std::int64_t mlp_ratio, double dropout);
  torch::Tensor forward(const torch::Tensor& x);
  AttentionImpl& attention() { return *attn_; }
  const AttentionImpl& attention() const { return *attn_; }

 private:
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  std::shared_ptr<AttentionImpl> attn_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(TransformerBlock);

struct LmConfig {
  std::int64_t vocab = 256;  ///< byte-level
  std::int64_t n_layers = 4;
  std::int64_t mlp_ratio = 4;
  bool tied_head = true;      ///< output head shares the embedding matrix
  double dropout = 0.0;       ///< residual dropout
  AttentionConfig attention;  ///< d_model and n_heads live here

  /// Throws InvalidArgument naming the bad field.
  void validate() const;
};

/// Embedding -> n_layers blocks -> final LayerNorm -> head. tokens int64 [B, T] -> logits [B, T,
/// vocab].
class CharLmImpl : public torch::nn::Module {
 public:
  explicit CharLmImpl(const LmConfig& config);
  torch::Tensor forward(const torch::Tensor& tokens);
  const LmConfig& config() const { return config_; }
  std::int64_t n_layers() const { return static_cast<std::int64_t>(blocks_.size()); }
  AttentionImpl& attention(std::int64_t layer) {
    return blocks_.at(static_cast<std::size_t>(layer))->attention();
  }
  /// Diagnostics of every layer's attention from the last forward (the support and gate fields
  /// only while recording: set_record_diagnostics).
  std::vector<AttentionDiagnostics> diagnostics() const;
  /// AttentionImpl::set_record_diagnostics on every layer (default off).
  void set_record_diagnostics(bool on);
  /// Whether every layer records its diagnostics.
  bool record_diagnostics() const;

 private:
  LmConfig config_;
  torch::nn::Embedding embed_{nullptr};
  std::vector<TransformerBlock> blocks_;
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::nn::Linear head_{nullptr};  // untied only
};
TORCH_MODULE(CharLm);

/// Number of parameter scalars (each tensor counted once, so a tied head is not double counted).
std::int64_t count_parameters(const torch::nn::Module& module, bool trainable_only = true);

/// State-matched sliding window (docs/layers.md §3): the hybrid's local width (its chunk in chunk
/// mode, HybridSettings::local_width()) plus its average |S ∪ E|,
/// rounded to the nearest integer.
std::int64_t state_matched_window(std::int64_t local_width, double average_support);

}  // namespace svattn::layers
