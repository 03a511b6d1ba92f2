// The `--set` checks the LM experiments (E5, E6) share: the device exists and a step's batch x seq
// stays within the trainer's bound (docs/experiments.md "Ranges of the `--set` keys").
#pragma once
#include <cstdint>
#include <string>

#include "svattn/errors.h"
#include "experiments/options.h"
#include "svattn/lm/trainer.h"

namespace svattn::experiments {

inline void check_lm_run(const std::string& id, const nlohmann::json& s) {
  try {
    lm::parse_device(s["device"].get<std::string>());
  } catch (const InvalidArgument&) {
    bad(id + ".device", "cpu, or cuda / cuda:N with that GPU present", s["device"]);
  }
  if (s["batch"].get<std::int64_t>() * s["seq"].get<std::int64_t>() >
      lm::TrainHyper::kMaxStepTokens)
    bad(id + ".batch",
        "such that batch x seq <= " + std::to_string(lm::TrainHyper::kMaxStepTokens) + " tokens",
        s["batch"]);
}

}  // namespace svattn::experiments
