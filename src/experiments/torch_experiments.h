// The LibTorch half of the experiments wing (svattn_experiments_torch): E3 selective copy, E5
// character LM, E6 training throughput, and E1's learned-keys source (a small trained hybrid).
#pragma once

namespace svattn::experiments {

/// Installs E3, E5 and E6 into the registry (registry.h) and E1's learned-keys source. Idempotent.
/// Called by the CLI binary that links LibTorch (svattn-torch) and by the tests.
void install_torch_experiments();

}  // namespace svattn::experiments
