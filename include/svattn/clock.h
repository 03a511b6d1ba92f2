// The clock's names in namespace svattn for the experiments wing: the one implementation is the
// private support layer's (src/support/clock.h). Not installed.
#pragma once
#include "support/clock.h"

namespace svattn {
using support::Stopwatch;
using support::utc_now;
}  // namespace svattn
