// Helpers shared by the experiment drivers (common.h): plot lists, stable seed components, the job
// pool of side-by-side runs.
#include "common.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "svattn/errors.h"

namespace svattn::experiments {

namespace detail {

void run_jobs(const std::vector<std::function<void()>>& jobs, int workers) {
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(jobs.size());
  auto work = [&] {
    for (std::size_t j = next++; j < jobs.size(); j = next++) {
      try {
        jobs[j]();
      } catch (...) {
        errors[j] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < std::max(1, workers); ++w) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
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

std::string duration(double seconds) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  if (seconds < 120) {
    os.precision(1);
    os << seconds << " s";
  } else if (seconds < 3 * 3600) {
    os << static_cast<long>(seconds / 60) << " min " << static_cast<long>(std::fmod(seconds, 60))
       << " s";
  } else {
    os.precision(1);
    os << seconds / 3600 << " h";
  }
  return os.str();
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
