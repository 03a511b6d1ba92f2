// One training step of the character LMs, the schedule, and the AdamW parameter groups.
#include "step.h"

#include <cmath>

#include "svattn/lm/trainer.h"

namespace svattn::lm {

using torch::Tensor;

namespace detail {

Tensor window_tensor(const Corpus& corpus, const std::vector<std::int64_t>& offsets, std::int64_t seq) {
  const auto B = static_cast<std::int64_t>(offsets.size());
  Tensor t = torch::empty({B, seq + 1}, torch::kInt64);
  auto acc = t.accessor<std::int64_t, 2>();
  const std::uint8_t* d = corpus.data();
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t j = 0; j <= seq; ++j) acc[i][j] = d[offsets[static_cast<std::size_t>(i)] + j];
  return t;
}

double schedule(const TrainHyper& h, std::int64_t step, std::int64_t total) {
  if (h.warmup > 0 && step <= h.warmup) return h.lr * static_cast<double>(step) / static_cast<double>(h.warmup);
  const double span = static_cast<double>(std::max<std::int64_t>(1, total - h.warmup));
  const double p = std::min(1.0, static_cast<double>(step - h.warmup) / span);
  const double floor = h.min_lr_ratio * h.lr;
  return floor + (h.lr - floor) * 0.5 * (1.0 + std::cos(M_PI * p));
}

torch::Device model_device(layers::CharLm& model) {
  const auto params = model->parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

StepOut train_step(layers::CharLm& model, torch::optim::Optimizer& opt, const Tensor& cpu_windows, double clip) {
  const Tensor windows = cpu_windows.to(model_device(model));
  const auto T = windows.size(1) - 1;
  Tensor x = windows.narrow(1, 0, T), y = windows.narrow(1, 1, T);
  Tensor logits = model->forward(x);
  Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
  opt.zero_grad();
  loss.backward();
  StepOut out;
  std::vector<Tensor> params;
  for (auto& p : model->parameters()) params.push_back(p);
  if (clip > 0) {
    out.grad_norm = torch::nn::utils::clip_grad_norm_(params, clip);
  } else {
    double s = 0;
    for (auto& p : params)
      if (p.grad().defined()) s += p.grad().pow(2).sum().item<double>();
    out.grad_norm = std::sqrt(s);
  }
  opt.step();
  out.loss = loss.item<double>();
  return out;
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

}  // namespace detail

// A hybrid gate parameter: some component of its dotted name starts with "gate_" (gate_proj,
// gate_bias, gate_position).
bool is_gate_parameter(const std::string& name) {
  for (std::size_t at = 0; at < name.size();) {
    if (name.compare(at, 5, "gate_") == 0) return true;
    const auto dot = name.find('.', at);
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  return false;
}

// AdamW groups: matrices decay; vectors, and the gate unless h.gate_weight_decay, do not.
std::vector<torch::optim::OptimizerParamGroup> param_groups(torch::nn::Module& model, const TrainHyper& h) {
  std::vector<Tensor> decay, no_decay;
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    const Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    const bool decays = p.dim() >= 2 && (h.gate_weight_decay || !is_gate_parameter(item.key()));
    (decays ? decay : no_decay).push_back(p);
  }
  auto opts = [&](double wd) {
    auto o = std::make_unique<torch::optim::AdamWOptions>(h.lr);
    o->betas(std::make_tuple(h.beta1, h.beta2)).eps(h.eps).weight_decay(wd);
    return o;
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, opts(h.weight_decay));
  groups.emplace_back(no_decay, opts(0.0));
  return groups;
}

}  // namespace svattn::lm
