// The selective-copy generator (E3) and the state sizes used to match the baselines (task.h).
// The generator draws from support::Rng (the std:: distributions are implementation-defined).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "svattn/errors.h"
#include "experiments/e3_selective_copy/task.h"

namespace svattn::experiments::e3_selective_copy {

void SelectiveCopyTask::validate() const {
  if (k < 1) throw InvalidArgument("selective copy: k must be >= 1");
  if (symbols < 2) throw InvalidArgument("selective copy: symbols must be >= 2");
  if (prefix < k) throw InvalidArgument("selective copy: prefix must be >= k");
}

SelectiveCopyBatch make_selective_copy_batch(const SelectiveCopyTask& task, int batch, Rng& rng) {
  task.validate();
  if (batch < 1) throw InvalidArgument("selective copy: batch must be >= 1");
  SelectiveCopyBatch out;
  out.batch = batch;
  out.length = task.length();
  const auto n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(out.length);
  out.inputs.assign(n, SelectiveCopyTask::kPad);
  out.targets.assign(n, -100);
  std::vector<int> slots(static_cast<std::size_t>(task.prefix));
  for (int b = 0; b < batch; ++b) {
    std::int64_t* in = out.inputs.data() + static_cast<std::size_t>(b) * out.length;
    std::int64_t* tg = out.targets.data() + static_cast<std::size_t>(b) * out.length;
    // k distinct positions: a partial Fisher–Yates shuffle of 0..prefix-1.
    std::iota(slots.begin(), slots.end(), 0);
    for (int i = 0; i < task.k; ++i) {
      const auto j = static_cast<std::size_t>(rng.between(i, task.prefix - 1));
      std::swap(slots[static_cast<std::size_t>(i)], slots[j]);
    }
    std::vector<int> pos(slots.begin(), slots.begin() + task.k);
    std::sort(pos.begin(), pos.end());
    for (int i = 0; i < task.k; ++i) {
      const int s = SelectiveCopyTask::kFirstSymbol + static_cast<int>(rng.below(static_cast<std::uint64_t>(task.symbols)));
      in[pos[static_cast<std::size_t>(i)]] = s;
      tg[task.prefix + i] = s;  // the go marker predicts the first symbol, query j the (j + 1)-th
    }
    in[task.prefix] = SelectiveCopyTask::kGo;
    for (int i = 1; i < task.k; ++i) in[task.prefix + i] = SelectiveCopyTask::kQuery;
    out.data_positions.push_back(std::move(pos));
  }
  return out;
}

double state_floats_per_head(const layers::AttentionConfig& config, double average_support,
                             std::int64_t context) {
  config.validate();
  const double dh = static_cast<double>(config.d_model / config.n_heads);
  const double dk = dh, dv = dh;
  switch (config.type) {
    case layers::AttentionType::kSoftmax:
      return static_cast<double>(context) * (dk + dv);
    case layers::AttentionType::kSlidingWindow:
      return static_cast<double>(std::min(config.window, context)) * (dk + dv);
    case layers::AttentionType::kLinear:
      return dk * dv + dk;
    case layers::AttentionType::kDeltaNet:
      return dk * dv;
    case layers::AttentionType::kHybrid:
      if (!(average_support >= 0)) throw InvalidArgument("state_floats_per_head: hybrid needs the average support");
      // Local span (chunk, or W_loc + chunk - 1 with the sliding local path; docs/layers.md §3) plus
      // the support's keys, values and coefficients; without a memory only the local span.
      if (!config.hybrid.memory) return static_cast<double>(config.hybrid.local_width()) * (dk + dv);
      return (static_cast<double>(config.hybrid.local_width()) + average_support) * (dk + dv) + average_support;
  }
  throw InvalidArgument("state_floats_per_head: unknown attention type");
}

}  // namespace svattn::experiments::e3_selective_copy
