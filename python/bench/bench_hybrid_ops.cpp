// C++ side of the HybridAttention throughput comparison (python/bench/bench_hybrid.py,
// docs/performance.md "Python"), loaded into the benchmark's own process: a TorchScript custom
// class torch.classes.svattn_bench.HybridStep holding the C++ HybridSvAttention layer, whose
// step(x) runs forward + sum().backward() and returns its wall time measured inside C++. With it
// the Python module and the C++ layer run in ONE process, alternating step by step on the same
// input, so both see the same machine load. Built only with SVATTN_BUILD_BENCH and LibTorch.
#include <time.h>
#include <torch/custom_class.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <tuple>

#include "support/clock.h"
#include "svattn/torch/attention.h"

namespace {

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

class HybridStep : public torch::CustomClassHolder {
 public:
  // The layer is built after torch::manual_seed(seed), as the Python side builds its module.
  HybridStep(int64_t d_model, int64_t heads, int64_t chunk, std::string path, int64_t seed) {
    svattn::layers::AttentionConfig c;
    c.type = svattn::layers::AttentionType::kHybrid;
    c.d_model = d_model;
    c.n_heads = heads;
    c.hybrid.chunk = chunk;
    c.hybrid.path = svattn::layers::global_path_from_string(path);
    torch::manual_seed(static_cast<uint64_t>(seed));
    layer_ = svattn::layers::make_attention(c);
    layer_->set_record_diagnostics(true);  // support_mean() reads the last step's
  }

  /// (wall, CPU) seconds of layer(x).sum().backward() (x's gradient accumulates, as on the Python
  /// side). CPU is the process's CPU time (CLOCK_PROCESS_CPUTIME_ID, the clock of Python's
  /// time.process_time): unlike the wall time it does not count the time other processes of a
  /// shared machine hold the cores.
  std::tuple<double, double> step(const torch::Tensor& x) {
    const double c0 = cpu_seconds();
    const svattn::support::Stopwatch watch;
    layer_->forward(x).sum().backward();
    const double wall = watch.seconds();
    return {wall, cpu_seconds() - c0};
  }

  double support_mean() const { return layer_->diagnostics().support_mean; }

  int64_t num_parameters() const {
    int64_t n = 0;
    for (const auto& p : layer_->parameters()) n += p.numel();
    return n;
  }

 private:
  std::shared_ptr<svattn::layers::AttentionImpl> layer_;
};

TORCH_LIBRARY(svattn_bench, m) {
  m.class_<HybridStep>("HybridStep")
      .def(torch::init<int64_t, int64_t, int64_t, std::string, int64_t>())
      .def("step", &HybridStep::step)
      .def("support_mean", &HybridStep::support_mean)
      .def("num_parameters", &HybridStep::num_parameters);
}

}  // namespace
