#include "common.h"

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace svattn::experiments::lmx {

nlohmann::json machine() {
  std::string cpu = "unknown";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto pos = line.find(':');
      if (pos != std::string::npos) cpu = line.substr(pos + 2);
      break;
    }
  }
  nlohmann::json m = {{"cpu", cpu}, {"hardware_threads", std::thread::hardware_concurrency()}};
#if defined(__clang__)
  m["compiler"] = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  m["compiler"] = std::string("gcc ") + __VERSION__;
#endif
  return m;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void write_outputs(const ExperimentOptions& o, const std::string& id, nlohmann::json& j,
                   const std::string& markdown) {
  ensure_dir(o.out_dir);
  j["markdown_file"] = id + ".md";
  j["json_file"] = id + ".json";
  write_text_file((std::filesystem::path(o.out_dir) / (id + ".md")).string(), markdown);
  write_json_file((std::filesystem::path(o.out_dir) / (id + ".json")).string(), j);
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
