// The generator's names in namespace svattn for the experiments wing: the one generator is the
// private support layer's (src/support/random.h). Not installed.
#pragma once
#include "support/random.h"

namespace svattn {
using support::derive_seed;
using support::Rng;
using support::shuffle_in_place;
}  // namespace svattn
