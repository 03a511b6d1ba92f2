// LibTorch threads, device names and seeded model construction of the character LMs.
#include "svattn/lm/runtime.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>

#include "svattn/errors.h"
#include "svattn/lm/blas.h"

namespace svattn::lm {

int max_threads() {
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min(4u * cpus, 1024u));
}

void set_threads(int threads) {
  if (threads < 1 || threads > max_threads())
    throw InvalidArgument("--threads must be in [1, " + std::to_string(max_threads()) +
                          "] (4 x the " + std::to_string(std::thread::hardware_concurrency()) +
                          " CPUs of this machine, at most 1024), got " + std::to_string(threads));
  at::set_num_threads(threads);
  set_blas_threads(threads);
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      at::set_num_interop_threads(1);
    } catch (const c10::Error&) {
      // Already started by an earlier parallel region: keep LibTorch's choice.
    }
  });
}

torch::Device parse_device(const std::string& name) {
  std::optional<torch::Device> d;
  try {
    d.emplace(name);
  } catch (const c10::Error&) {
    throw InvalidArgument("device '" + name + "' (expected cpu, cuda or cuda:N)");
  }
  if (d->is_cuda()) {
    if (!torch::cuda::is_available())
      throw InvalidArgument("device '" + name + "': no CUDA device (this LibTorch has no CUDA or sees no GPU)");
    if (d->has_index() && d->index() >= static_cast<int>(torch::cuda::device_count()))
      throw InvalidArgument("device '" + name + "': only " + std::to_string(torch::cuda::device_count()) +
                            " CUDA device(s)");
  } else if (!d->is_cpu()) {
    throw InvalidArgument("device '" + name + "' (expected cpu, cuda or cuda:N)");
  }
  return *d;
}

layers::CharLm seeded_char_lm(const layers::LmConfig& config, std::uint64_t seed) {
  // Serialises the uses of LibTorch's global CPU generator (seeding + initialisation).
  static std::mutex global_generator;
  const std::lock_guard<std::mutex> lock(global_generator);
  torch::manual_seed(seed);
  return layers::CharLm(config);
}

}  // namespace svattn::lm
