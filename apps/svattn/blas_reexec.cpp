// The OpenBLAS kernel re-exec of the LibTorch commands (blas_reexec.h).
#include "blas_reexec.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "svattn/lm/blas.h"

namespace svattn::cli {

namespace {

bool cpu_has_flag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream ss(line.substr(line.find(':') + 1));
    std::string f;
    while (ss >> f)
      if (f == flag) return true;
    return false;
  }
  return false;
}

}  // namespace

void reexec_with_fast_blas_if_misdetected() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::getenv("SVATTN_NO_BLAS_FIX") != nullptr)
    return;
  const std::string core = lm::blas_core_name();
  if (core != "Prescott" && core != "prescott") return;
  const char* target = cpu_has_flag("avx512f") ? "SkylakeX"
                       : cpu_has_flag("avx2")  ? "Haswell"
                                               : nullptr;
  if (target == nullptr) return;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string cur;
  for (char c : all) {
    if (c == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (args.empty()) return;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Silent: a command's stderr carries only its own messages (one line on bad input); `train`
  // prints the kernels in use in its header, and SVATTN_NO_BLAS_FIX=1 keeps OpenBLAS's choice.
  ::setenv("OPENBLAS_CORETYPE", target, 1);
  ::execv("/proc/self/exe", argv.data());
  ::unsetenv("OPENBLAS_CORETYPE");  // execv failed: carry on with the slow kernels
}

}  // namespace svattn::cli
