// Dispatch, options and output helpers of the experiment drivers.
#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common.h"
#include "svattn/errors.h"
#include "svattn/experiments/reproduce.h"

namespace svattn::experiments {

void ExperimentOptions::validate() const {
  if (preset != "quick" && preset != "paper" && preset != "tiny") {
    throw InvalidArgument("unknown preset '" + preset + "' (expected quick, paper or tiny)");
  }
  if (trials < 0) throw InvalidArgument("trials must be >= 0 (got " + std::to_string(trials) + ")");
  if (steps < 0) throw InvalidArgument("steps must be >= 0 (got " + std::to_string(steps) + ")");
  if (out_dir.empty()) throw InvalidArgument("the output directory must not be empty");
}

std::vector<std::string> experiment_ids() {
  if (e7_available()) return {"E1", "E2", "E4", "E7"};
  return {"E1", "E2", "E4"};
}

bool e7_available() {
#ifdef SVATTN_EXPERIMENTS_HAVE_STORE
  return true;
#else
  return false;
#endif
}

#ifndef SVATTN_EXPERIMENTS_HAVE_STORE
nlohmann::json run_e7(const ExperimentOptions&) {
  throw InvalidArgument("E7 needs the audited store: rebuild with -DSVATTN_BUILD_STORE=ON (SQLite 3)");
}
#endif

std::string experiment_title(const std::string& id) {
  if (id == "E1") return "Exact forgetting: decremental removal vs retraining from scratch";
  if (id == "E2") return "Rare-item recall under skewed redundancy at equal token budget";
  if (id == "E4") return "ICU streams: critical-deterioration hours retained at equal budget";
  if (id == "E7") return "Applications: surgical fact forgetting, exact knowledge editing, patient erasure";
  throw InvalidArgument("unknown experiment '" + id + "' (expected E1, E2, E4 or E7)");
}

nlohmann::json run_experiment(const std::string& id, const ExperimentOptions& options) {
  std::string up = id;
  std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return std::toupper(c); });
  if (up == "E1") return run_e1(options);
  if (up == "E2") return run_e2(options);
  if (up == "E4") return run_e4(options);
  if (up == "E7") return run_e7(options);
  // Experiments registered by other libraries (E3/E5/E6 need LibTorch: svattn_lm_experiments).
  if (const ExperimentRunner runner = find_runner(up)) return runner(options);
  if (up == "E3" || up == "E5" || up == "E6")
    throw InvalidArgument("experiment " + up + " needs the LibTorch build (trained models); this "
                          "build has no runner for it");
  throw InvalidArgument("unknown experiment '" + id + "' (expected E1 ... E7)");
}

namespace detail {

nlohmann::json machine_info() {
  nlohmann::json m;
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
  m["cpu"] = cpu;
  m["hardware_threads"] = std::thread::hardware_concurrency();
#if defined(__clang__)
  m["compiler"] = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  m["compiler"] = std::string("gcc ") + __VERSION__;
#else
  m["compiler"] = "unknown";
#endif
#ifdef NDEBUG
  m["build"] = "release (NDEBUG)";
#else
  m["build"] = "debug (assertions on)";
#endif
  m["threads_used"] = 1;
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
  const std::string md = id + ".md";
  const std::string js = id + ".json";
  j["markdown_file"] = md;
  j["json_file"] = js;
  write_text_file((std::filesystem::path(o.out_dir) / md).string(), markdown);
  write_json_file((std::filesystem::path(o.out_dir) / js).string(), j);
}

std::string plots_markdown(const std::vector<PlotResult>& plots,
                           const std::vector<std::string>& captions) {
  std::string s;
  for (std::size_t i = 0; i < plots.size(); ++i) {
    const std::string cap = i < captions.size() ? captions[i] : plots[i].file;
    if (plots[i].written) {
      s += "![" + cap + "](" + plots[i].file + ")\n\n";
    } else {
      s += "- *" + cap + "*: " + plots[i].note + "\n";
    }
  }
  return s;
}

std::uint64_t name_hash(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

namespace {
PlotResult skipped(const std::string& name) {
  PlotResult r;
  r.file = name + ".png";
  r.note = "plot skipped on request (plots disabled)";
  return r;
}
}  // namespace

PlotResult maybe_line_plot(const ExperimentOptions& o, const std::string& name, const LinePlot& p) {
  if (!o.plots) return skipped(name);
  return write_line_plot(o.out_dir, name, p);
}

PlotResult maybe_bar_plot(const ExperimentOptions& o, const std::string& name, const BarPlot& p) {
  if (!o.plots) return skipped(name);
  return write_bar_plot(o.out_dir, name, p);
}

}  // namespace detail
}  // namespace svattn::experiments
