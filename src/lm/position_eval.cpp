// BPC per position within the chunk and the learned bandwidths of a trained char LM.
#include "svattn/lm/position_eval.h"

#include <cmath>
#include <map>
#include <string>

#include "svattn/errors.h"

namespace svattn::lm {

using torch::Tensor;

nlohmann::json PositionEval::to_json() const {
  return {{"period", period}, {"windows", windows}, {"targets", targets}, {"bpc", bpc},
          {"bpc_by_position", bpc_by_position}, {"targets_by_position", targets_by_position}};
}

namespace {

// Tokens [B, seq + 1] of the windows starting at `offsets` (as lm::evaluate reads them).
Tensor windows_at(const Corpus& corpus, const std::vector<std::int64_t>& offsets, std::int64_t seq) {
  Tensor t = torch::empty({static_cast<std::int64_t>(offsets.size()), seq + 1}, torch::kInt64);
  auto acc = t.accessor<std::int64_t, 2>();
  for (std::size_t i = 0; i < offsets.size(); ++i)
    for (std::int64_t j = 0; j <= seq; ++j) acc[static_cast<std::int64_t>(i)][j] = corpus.data()[offsets[i] + j];
  return t;
}

void check(const PositionEvalOptions& o) {
  if (o.seq < 2) throw InvalidArgument("evaluate_by_position: seq must be >= 2, got " + std::to_string(o.seq));
  if (o.period < 1)
    throw InvalidArgument("evaluate_by_position: period must be >= 1, got " + std::to_string(o.period));
  if (o.batch < 1) throw InvalidArgument("evaluate_by_position: batch must be >= 1, got " + std::to_string(o.batch));
}

}  // namespace

PositionEval evaluate_by_position(layers::CharLm& model, const Corpus& corpus, const PositionEvalOptions& o) {
  check(o);
  const auto offsets = eval_offsets(corpus, o.split, o.seq, o.windows);
  torch::NoGradGuard ng;
  const bool was_training = model->is_training();
  model->eval();
  const torch::Device device = model->parameters().front().device();
  // Per-position sums of the NLL (nats) over every window, in a fixed order: fp64 throughout.
  Tensor nll_by_t = torch::zeros({o.seq}, torch::kFloat64);
  for (std::size_t i = 0; i < offsets.size(); i += static_cast<std::size_t>(o.batch)) {
    const std::size_t e = std::min(offsets.size(), i + static_cast<std::size_t>(o.batch));
    const std::vector<std::int64_t> part(offsets.begin() + static_cast<std::ptrdiff_t>(i),
                                         offsets.begin() + static_cast<std::ptrdiff_t>(e));
    const Tensor w = windows_at(corpus, part, o.seq).to(device);
    const Tensor logits = model->forward(w.narrow(1, 0, o.seq)).to(torch::kFloat64);
    const Tensor y = w.narrow(1, 1, o.seq);
    const Tensor nll = -torch::log_softmax(logits, -1).gather(-1, y.unsqueeze(-1)).squeeze(-1);  // [B, T]
    nll_by_t += nll.sum(0).cpu();
  }
  if (was_training) model->train();
  PositionEval r;
  r.period = o.period;
  r.windows = static_cast<std::int64_t>(offsets.size());
  r.targets = r.windows * o.seq;
  r.bpc_by_position.assign(static_cast<std::size_t>(o.period), 0.0);
  r.targets_by_position.assign(static_cast<std::size_t>(o.period), 0);
  const auto acc = nll_by_t.accessor<double, 1>();
  double total = 0;
  for (std::int64_t t = 0; t < o.seq; ++t) {
    const auto p = static_cast<std::size_t>(t % o.period);
    r.bpc_by_position[p] += acc[t];
    r.targets_by_position[p] += r.windows;
    total += acc[t];
  }
  for (std::size_t p = 0; p < r.bpc_by_position.size(); ++p)
    r.bpc_by_position[p] = r.targets_by_position[p] > 0
                               ? r.bpc_by_position[p] / static_cast<double>(r.targets_by_position[p]) / std::log(2.0)
                               : std::nan("");
  r.bpc = r.targets > 0 ? total / static_cast<double>(r.targets) / std::log(2.0) : std::nan("");
  return r;
}

std::vector<double> sigma_per_layer(layers::CharLm& model) {
  // Parameter (learned) or buffer (fixed) "block<l>.attn.log_sigma", one value per head.
  std::map<std::int64_t, double> by_layer;
  const auto collect = [&](const torch::OrderedDict<std::string, Tensor>& d) {
    for (const auto& kv : d) {
      const std::string& key = kv.key();
      const std::string tail = ".attn.log_sigma";
      if (key.rfind("block", 0) != 0 || key.size() <= tail.size() ||
          key.compare(key.size() - tail.size(), tail.size(), tail) != 0)
        continue;
      const std::int64_t layer = std::stoll(key.substr(5, key.size() - tail.size() - 5));
      by_layer[layer] = kv.value().detach().to(torch::kFloat64).exp().mean().item<double>();
    }
  };
  collect(model->named_parameters(true));
  collect(model->named_buffers(true));
  std::vector<double> out;
  for (const auto& [layer, sigma] : by_layer) out.push_back(sigma);
  return out;
}

}  // namespace svattn::lm
