// Registration of E3, E5 and E6 with `svattn reproduce`.
#include "svattn/experiments/reproduce.h"
#include "svattn/lm/experiments.h"

namespace svattn::experiments {

void register_lm_experiments() {
  register_runner("E3", run_e3);
  register_runner("E5", run_e5);
  register_runner("E6", run_e6);
}

}  // namespace svattn::experiments
