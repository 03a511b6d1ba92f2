// Tokens per second of full training steps of a character-LM preset.
#include "svattn/lm/throughput.h"

#include "step.h"
#include "support/clock.h"
#include "svattn/errors.h"
#include "svattn/lm/runtime.h"
#include "svattn/lm/trainer.h"

namespace svattn::lm {

Throughput measure_throughput(const Preset& preset, const Corpus& corpus, std::int64_t steps,
                              std::int64_t warmup, std::uint64_t seed, const std::string& device) {
  if (steps < 1 || warmup < 0) throw InvalidArgument("measure_throughput: steps >= 1, warmup >= 0");
  const torch::Device dev = parse_device(device);
  torch::manual_seed(seed);
  layers::CharLm model(preset.model);
  model->to(dev);
  torch::optim::AdamW opt(param_groups(*model, preset.train), torch::optim::AdamWOptions(preset.train.lr));
  model->train();
  model->set_record_diagnostics(true);  // support and solver time per step (read after the clock)
  Throughput t;
  t.preset = preset.name;
  t.parameters = layers::count_parameters(*model);
  double seconds = 0, sv_seconds = 0, support = 0;
  int support_n = 0;
  const auto& h = preset.train;
  for (std::int64_t i = 0; i < warmup + steps; ++i) {
    detail::set_lr(opt, h.lr * 0.1);
    const auto w = detail::window_tensor(corpus, batch_offsets(corpus, Split::kTrain, h.batch, h.seq, seed, i + 1), h.seq);
    const support::Stopwatch clock;
    detail::train_step(model, opt, w, h.clip);
    const double dt = clock.seconds();
    if (i < warmup) continue;
    seconds += dt;
    for (const auto& d : model->diagnostics()) {
      sv_seconds += d.solver_seconds;
      if (std::isfinite(d.support_mean)) support += d.support_mean, ++support_n;
    }
  }
  t.seconds_per_step = seconds / static_cast<double>(steps);
  t.tokens_per_second = static_cast<double>(steps * h.batch * h.seq) / seconds;
  t.sv_forward_share = seconds > 0 ? sv_seconds / seconds : 0;
  if (support_n > 0) t.support_mean = support / support_n;
  return t;
}

}  // namespace svattn::lm
