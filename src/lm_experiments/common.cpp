#include "common.h"

#include "../experiments/common.h"

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace svattn::experiments::lmx {

// The report header, time stamp and output files are the torch-free experiments' own helpers, so
// every E?.md / E?.json is written the same way.
nlohmann::json machine() { return detail::machine_info(); }

std::string utc_now() { return detail::utc_now(); }

void write_outputs(const ExperimentOptions& o, const std::string& id, nlohmann::json& j,
                   const std::string& markdown) {
  detail::write_outputs(o, id, j, markdown);
}

PlotResult line_plot(const ExperimentOptions& o, const std::string& name, const LinePlot& p) {
  if (o.plots) return write_line_plot(o.out_dir, name, p);
  PlotResult r;
  r.file = name + ".png";
  r.written = false;
  r.note = "plots disabled (--no-plots)";
  return r;
}

std::string plots_markdown(const std::vector<PlotResult>& plots) {
  std::string s;
  for (const auto& p : plots) {
    if (p.written) {
      s += "![" + p.file + "](" + p.file + ")\n\n";
    } else {
      s += "- *" + p.file + "*: " + p.note + "\n";
    }
  }
  return s;
}

nlohmann::json plots_json(const std::vector<PlotResult>& plots) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : plots) a.push_back(p.json());
  return a;
}

double sd_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

std::string duration(double seconds) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  if (seconds < 120) {
    os.precision(1);
    os << seconds << " s";
  } else if (seconds < 3 * 3600) {
    os << static_cast<long>(seconds / 60) << " min " << static_cast<long>(std::fmod(seconds, 60)) << " s";
  } else {
    os.precision(1);
    os << seconds / 3600 << " h";
  }
  return os.str();
}

}  // namespace svattn::experiments::lmx
