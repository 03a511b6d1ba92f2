// Registers the trained-model experiments (E3 selective copy, E5 character LM, E6 training
// throughput; LibTorch) as runners, so that `svattn experiment E3|E5|E6` (cmd_experiment.cpp, via
// experiments::run_experiment) and `svattn reproduce` find them. Compiled only with LibTorch.
#include "commands.h"
#include "svattn/lm/experiments.h"

namespace svattn::cli {
namespace {

Registrar reg("experiment-torch", [](CLI::App&, int&) { experiments::register_lm_experiments(); });

}  // namespace
}  // namespace svattn::cli
