// Numbers as the report's table cells print them (scientific, fixed, mean ± CI, percent).
#pragma once
#include <string>
#include <vector>

#include "experiments/framework/statistics.h"

namespace svattn::experiments {

/// "1.23e-09"; "0" for exactly 0 (so an exact zero is never printed as a small number); "nan".
std::string fmt_sci(double v, int digits = 2);
/// Fixed notation with `digits` decimals.
std::string fmt_fixed(double v, int digits = 3);
/// "0.86 ± 0.03".
std::string fmt_mean_ci(const MeanCi& m, int digits = 3);
/// "0.86 ± 0.03": mean and sample sd of `v` ("n/a" for an empty vector).
std::string fmt_mean_sd(const std::vector<double>& v, int digits = 3);
/// "98.0 %" for 0.98.
std::string fmt_pct(double share, int digits = 1);

}  // namespace svattn::experiments
