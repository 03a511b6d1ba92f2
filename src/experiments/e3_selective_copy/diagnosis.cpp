// Per-output diagnosis of a trained E3 hybrid (diagnosis.h).
#include "experiments/e3_selective_copy/diagnosis.h"

#include <torch/torch.h>

#include "support/random.h"
#include "svattn/torch/attention.h"

namespace svattn::experiments::e3_selective_copy {

using nlohmann::json;
using torch::Tensor;

int steps_to_loss(const std::vector<std::pair<int, double>>& loss_curve, double threshold) {
  for (const auto& [step, loss] : loss_curve)
    if (loss < threshold) return step;
  return -1;
}

namespace {

// Sum over the memories of a forward of `x` of each layer's mean support (mean over heads): the
// diagnostics average over the chunks >= 1 of the shifted sequence, so times their count.
std::vector<double> support_sums(layers::CharLm& model, const Tensor& x, std::int64_t shift) {
  model->set_record_diagnostics(true);
  model->forward(x);
  const auto diags = model->diagnostics();
  const double memories = static_cast<double>(std::max<std::int64_t>(0, x.size(1) - shift - 1));
  std::vector<double> out;
  for (const auto& d : diags) out.push_back(std::isfinite(d.support_mean) && memories > 0 ? d.support_mean * memories : 0.0);
  return out;
}

// The gate's memory share at position t per layer (mean over batch and heads), from the last forward.
std::vector<double> gates_at(layers::CharLm& model, std::int64_t t) {
  std::vector<double> out;
  for (std::int64_t l = 0; l < model->n_layers(); ++l) {
    auto* h = dynamic_cast<layers::HybridSvAttentionImpl*>(&model->attention(l));
    out.push_back(h != nullptr && h->last_gate().defined() && h->last_gate().size(2) > t
                      ? h->last_gate().select(2, t).mean().item<double>()
                      : std::nan(""));
  }
  return out;
}

}  // namespace

std::vector<OutputDiagnosis> diagnose_outputs(layers::CharLm& model, const SelectiveCopyTask& task,
                                              int sequences, std::uint64_t seed) {
  const auto& hs = model->config().attention.hybrid;
  if (hs.chunk != 1 || !hs.memory || sequences < 1) return {};
  const std::int64_t shift = hs.min_local() - 1;  // position t reads the memory of chunk t - shift
  torch::NoGradGuard ng;
  model->eval();
  Rng rng(seed);
  const SelectiveCopyBatch b = make_selective_copy_batch(task, sequences, rng);
  const Tensor x = torch::from_blob(const_cast<std::int64_t*>(b.inputs.data()), {sequences, b.length}, torch::kInt64).clone();
  const Tensor pred = model->forward(x).argmax(-1);
  std::vector<OutputDiagnosis> out;
  for (int j = 0; j < task.k; ++j) {
    const std::int64_t t = task.prefix + j;
    OutputDiagnosis d;
    d.output = j + 1;
    d.gate_per_layer = gates_at(model, t);
    d.predicted_symbol_share.assign(static_cast<std::size_t>(task.k), 0.0);
    for (int s = 0; s < sequences; ++s) {
      const std::int64_t p = pred[s][t].item<std::int64_t>();
      const std::int64_t* in = b.inputs.data() + static_cast<std::size_t>(s) * b.length;
      d.recall += p == b.targets[static_cast<std::size_t>(s) * b.length + t] ? 1.0 / sequences : 0.0;
      for (int i = 0; i < task.k; ++i)
        if (p == in[b.data_positions[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)]])
          d.predicted_symbol_share[static_cast<std::size_t>(i)] += 1.0 / sequences;
    }
    out.push_back(d);
  }
  // Support of the memory read at t: the prefix 0..t minus the prefix 0..t-1 (one memory more).
  for (auto& d : out) {
    const std::int64_t t = task.prefix + d.output - 1;
    const auto with = support_sums(model, x.narrow(1, 0, t + 1), shift);
    const auto without = support_sums(model, x.narrow(1, 0, t), shift);
    for (std::size_t l = 0; l < with.size(); ++l) d.support_per_layer.push_back(with[l] - without[l]);
  }
  return out;
}

}  // namespace svattn::experiments::e3_selective_copy
