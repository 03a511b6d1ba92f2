// The run header and the measure() prologue (framework/run_header.h).
#include "experiments/framework/run_header.h"

#include <fstream>
#include <thread>

namespace svattn::experiments {

void RunHeader::begin(const ExperimentOptions& options) {
  options.validate();
  clock_ = Stopwatch();
  preset = options.preset;
  seed = options.seed;
  machine = machine_info();
  created = utc_now();
}

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

}  // namespace svattn::experiments
