// Table-cell formatting of numbers (framework/format.h).
#include "experiments/framework/format.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace svattn::experiments {

std::string fmt_sci(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (v == 0.0) return "0";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*e", digits, v);
  return buf;
}

std::string fmt_fixed(double v, int digits) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string fmt_mean_ci(const MeanCi& m, int digits) {
  if (m.n == 0) return "n/a";
  return fmt_fixed(m.mean, digits) + " ± " + fmt_fixed(m.half_width, digits);
}

std::string fmt_mean_sd(const std::vector<double>& v, int digits) {
  if (v.empty()) return "n/a";
  return fmt_fixed(mean_of(v), digits) + " ± " + fmt_fixed(sd_of(v), digits);
}

std::string fmt_pct(double share, int digits) {
  if (std::isnan(share)) return "n/a";
  return fmt_fixed(100.0 * share, digits) + " %";
}

}  // namespace svattn::experiments
