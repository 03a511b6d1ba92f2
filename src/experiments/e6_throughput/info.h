// E6's identity: id, title, the paper's result and what a build without it needs (the
// registry lists it from here, torch-free; the report titles itself from here).
#pragma once
#include "experiments/framework/experiment_info.h"

namespace svattn::experiments::e6_throughput {

/// E6's identity in the registry and the report.
inline constexpr ExperimentInfo kInfo = {
    "E6", "Training throughput",
    "hybrid 9,125 tokens/s at 3.22M params, 35.8× slower than a softmax reference (Apple GPU)",
    "training-throughput runs of the hybrid and softmax LMs (LibTorch layers + LM trainer): the "
    "LibTorch build (svattn_experiments_torch); this build has no LibTorch"};

}  // namespace svattn::experiments::e6_throughput
