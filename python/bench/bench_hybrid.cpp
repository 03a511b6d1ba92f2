// C++ side of the HybridAttention throughput comparison (python/bench/bench_hybrid.py): forward +
// backward of the C++ HybridSvAttention layer on x [batch, seq, d_model]. Prints one JSON line with
// the wall time of every repetition (after `warmup` untimed ones).
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "svattn/torch/attention.h"

// argv: d_model heads seq batch chunk reps warmup threads path
int main(int argc, char** argv) {
  if (argc != 10) {
    std::fprintf(stderr,
                 "usage: bench_hybrid D_MODEL HEADS SEQ BATCH CHUNK REPS WARMUP THREADS PATH\n");
    return 2;
  }
  svattn::layers::AttentionConfig c;
  c.type = svattn::layers::AttentionType::kHybrid;
  c.d_model = std::stol(argv[1]);
  c.n_heads = std::stol(argv[2]);
  const long T = std::stol(argv[3]), B = std::stol(argv[4]);
  c.hybrid.chunk = std::stol(argv[5]);
  const int reps = std::stoi(argv[6]), warmup = std::stoi(argv[7]);
  torch::set_num_threads(std::stoi(argv[8]));
  c.hybrid.path = svattn::layers::global_path_from_string(argv[9]);
  torch::manual_seed(0);
  auto m = svattn::layers::make_attention(c);
  torch::Tensor x = torch::randn({B, T, c.d_model}).requires_grad_(true);
  std::printf("{\"seconds\": [");
  for (int r = 0; r < warmup + reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    m->forward(x).sum().backward();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r >= warmup) std::printf("%s%.6f", r > warmup ? ", " : "", s);
  }
  std::printf("], \"support_mean\": %.6f}\n", m->diagnostics().support_mean);
  return 0;
}
