// Throughput of every attention (forward + backward, CPU) and the exact-path backward vs autograd
// through a second solve. Prints Markdown tables.
//   bench_layers [--batch 8] [--seq 512] [--d-model 256] [--heads 4] [--chunk 64] [--C 0.0625]
//                [--iterations 200] [--reps 2] [--threads 2] [--seed 1] [--exact-seq 256]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "svattn/torch/layers.h"

using namespace svattn::layers;
using torch::Tensor;

namespace {

using svattn::bench::now;

struct Args {
  int64_t batch = 8, seq = 512, d_model = 256, heads = 4, chunk = 64, reps = 2, threads = 2, seed = 1;
  int64_t exact_seq = 256;
  int iterations = 200;
  double C = 1.0 / 16;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* name) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_layers: %s needs a value\n", name);
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    const std::string k = argv[i];
    if (k == "--batch") a.batch = std::stoll(next("--batch"));
    else if (k == "--seq") a.seq = std::stoll(next("--seq"));
    else if (k == "--d-model") a.d_model = std::stoll(next("--d-model"));
    else if (k == "--heads") a.heads = std::stoll(next("--heads"));
    else if (k == "--chunk") a.chunk = std::stoll(next("--chunk"));
    else if (k == "--C") a.C = std::stod(next("--C"));
    else if (k == "--iterations") a.iterations = std::stoi(next("--iterations"));
    else if (k == "--reps") a.reps = std::stoll(next("--reps"));
    else if (k == "--threads") a.threads = std::stoll(next("--threads"));
    else if (k == "--seed") a.seed = std::stoll(next("--seed"));
    else if (k == "--exact-seq") a.exact_seq = std::stoll(next("--exact-seq"));
    else {
      std::fprintf(stderr, "bench_layers: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

struct Row {
  std::string name;
  double fwd_bwd_s = 0;
  double tokens_per_s = 0;
  double support = -1;
  double solver_s = 0;
};

// Input activations: i.i.d. Gaussian, or (clustered) 16 Gaussian clusters with 10 % noise, which
// gives the SV memory structured keys and a support much smaller than the memory.
Tensor make_input(const Args& a, bool clustered) {
  if (!clustered) return torch::randn({a.batch, a.seq, a.d_model});
  Tensor centers = torch::randn({16, a.d_model});
  Tensor assign = torch::randint(0, 16, {a.batch, a.seq}, torch::kInt64);
  return centers.index({assign}) + 0.1 * torch::randn({a.batch, a.seq, a.d_model});
}

// The timed steps run as training does, with diagnostics recording off (the layers' default,
// docs/layers.md §3 and §8); the support column comes from one more, untimed step with it on. The SV
// forward seconds are the last timed step's (the layer times its solver either way).
Row run(const std::string& name, const AttentionConfig& cfg, const Args& a, bool clustered = false) {
  torch::manual_seed(a.seed);
  auto m = make_attention(cfg);
  Tensor x = make_input(a, clustered);
  auto step = [&] {
    m->zero_grad();
    Tensor y = m->forward(x);
    y.pow(2).mean().backward();
  };
  step();  // warm-up
  const double t0 = now();
  for (int64_t r = 0; r < a.reps; ++r) step();
  Row row;
  row.name = name;
  row.fwd_bwd_s = (now() - t0) / static_cast<double>(a.reps);
  row.tokens_per_s = static_cast<double>(a.batch * a.seq) / row.fwd_bwd_s;
  row.solver_s = m->diagnostics().solver_seconds;
  m->set_record_diagnostics(true);  // the support column, outside the timing
  step();
  row.support = m->diagnostics().support_mean;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  at::set_num_threads(static_cast<int>(a.threads));
  AttentionConfig base;
  base.d_model = a.d_model;
  base.n_heads = a.heads;
  base.scan_chunk = 64;
  base.hybrid.chunk = a.chunk;
  base.hybrid.problem.C = a.C;
  base.hybrid.batched.iterations = a.iterations;

  std::vector<Row> rows;
  auto with = [&](AttentionType t) {
    AttentionConfig c = base;
    c.type = t;
    return c;
  };
  rows.push_back(run("softmax (full causal)", with(AttentionType::kSoftmax), a));
  AttentionConfig hb = with(AttentionType::kHybrid);
  Row hyb = run("hybrid SV, batched, full memory", hb, a);
  const int64_t window = state_matched_window(a.chunk, std::isnan(hyb.support) ? 0.0 : hyb.support);
  AttentionConfig sw = with(AttentionType::kSlidingWindow);
  sw.window = window;
  rows.push_back(run("sliding window W=" + std::to_string(window) + " (state-matched)", sw, a));
  rows.push_back(run("linear attention (elu+1)", with(AttentionType::kLinear), a));
  rows.push_back(run("DeltaNet (chunkwise)", with(AttentionType::kDeltaNet), a));
  rows.push_back(hyb);
  AttentionConfig hbb = hb;
  hbb.hybrid.bounded = true;
  rows.push_back(run("hybrid SV, batched, bounded memory", hbb, a));
  AttentionConfig hbt = hb;
  hbt.hybrid.gate = GateType::kPerToken;
  rows.push_back(run("hybrid SV, batched, per-token gate", hbt, a));
  AttentionConfig he = hb;
  he.hybrid.path = GlobalPath::kExact;
  rows.push_back(run("hybrid SV, exact path, full memory", he, a));
  AttentionConfig heb = he;
  heb.hybrid.bounded = true;
  rows.push_back(run("hybrid SV, exact path, bounded memory", heb, a));
  rows.push_back(run("hybrid SV, batched, full memory (clustered input)", hb, a, true));
  rows.push_back(run("hybrid SV, batched, bounded memory (clustered input)", hbb, a, true));
  rows.push_back(run("hybrid SV, exact path, bounded memory (clustered input)", heb, a, true));

  std::printf("## Attention throughput (forward + backward, CPU, %lld threads)\n\n",
              static_cast<long long>(a.threads));
  std::printf("batch %lld, sequence %lld, d_model %lld, %lld heads, fp32; hybrid: chunk %lld, C = %.4g, "
              "FISTA %d iterations; mean of %lld runs after one warm-up, diagnostics recording off (as in "
              "training); mean support from one more, untimed step with it on.\n\n",
              static_cast<long long>(a.batch), static_cast<long long>(a.seq), static_cast<long long>(a.d_model),
              static_cast<long long>(a.heads), static_cast<long long>(a.chunk), a.C, a.iterations,
              static_cast<long long>(a.reps));
  std::printf("Input: i.i.d. Gaussian activations unless marked clustered (16 Gaussian clusters, 10 %% "
              "noise). Random keys put every memory token on the sphere (support = memory), the worst "
              "case for the SV solvers.\n\n");
  std::printf("| attention | fwd+bwd s | tokens/s | ratio to softmax (time) | mean support | SV forward s |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  const double ref = rows[0].fwd_bwd_s;
  for (const Row& r : rows) {
    std::printf("| %s | %.3f | %.0f | %.2fx |", r.name.c_str(), r.fwd_bwd_s, r.tokens_per_s, r.fwd_bwd_s / ref);
    if (std::isnan(r.support) || r.support < 0) std::printf(" - | - |\n");
    else std::printf(" %.1f | %.3f |\n", r.support, r.solver_s);
  }

  // Exact-path backward (saved KKT inverse) vs autograd through a second solve on the same partition.
  {
    const int64_t B = a.batch, H = a.heads, N = a.exact_seq, d = a.d_model / a.heads, G = B * H;
    torch::manual_seed(a.seed);
    auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
    // Keys of low intrinsic dimension (4) embedded in d dims, L2-normalised: a partition with
    // reserve, margin and error tokens (random high-dimensional keys are all margin).
    Tensor keys = torch::nn::functional::normalize(
        torch::matmul(torch::randn({B, H, N, 4}, f64), torch::randn({B, H, 4, d}, f64)),
        torch::nn::functional::NormalizeFuncOptions().dim(-1));
    Tensor values = torch::randn({B, H, N, d}, f64), queries = keys.clone();
    ExactSettings es;
    es.problem.C = a.C;
    Tensor k1 = keys.clone().requires_grad_(true), v1 = values.clone().requires_grad_(true);
    Tensor q1 = queries.clone().requires_grad_(true);
    ExactInfo info;
    double t0 = now();
    Tensor o1 = sv_exact_attention(k1, v1, q1, Tensor(), es, &info);
    const double exact_fwd = now() - t0;
    t0 = now();
    o1.pow(2).sum().backward();
    const double exact_bwd = now() - t0;

    Tensor k2 = keys.clone().requires_grad_(true), v2 = values.clone().requires_grad_(true);
    Tensor q2 = queries.clone().requires_grad_(true);
    t0 = now();
    Tensor sigma = torch::full({G}, es.problem.kernel.bandwidth, f64);
    Tensor x = k2.reshape({G, N, d});
    Tensor K = rbf_kernel(x, x, sigma);
    Tensor role = info.role.reshape({G, N});
    auto ab = bordered_coefficients(K, role, torch::full({G, N}, es.problem.C, f64), es.problem.ridge);
    Tensor o2 = sv_readout(q2.reshape({G, N, d}), x, v2.reshape({G, N, d}), ab.first, role, sigma);
    const double solve_fwd = now() - t0;
    t0 = now();
    o2.pow(2).sum().backward();
    const double solve_bwd = now() - t0;
    const double dgrad = ((k1.grad() - k2.grad()).norm() / k2.grad().norm()).item<double>();
    std::printf("\n## Exact-path backward vs autograd through a second solve (fp64)\n\n");
    std::printf("%lld memories of %lld keys (d = %lld, C = %.4g), %lld queries each; mean |S| = %.1f, "
                "mean |E| = %.1f (keys of intrinsic dimension 4); relative key-gradient difference %.1e.\n\n",
                static_cast<long long>(G), static_cast<long long>(N), static_cast<long long>(d), es.problem.C,
                static_cast<long long>(N), (info.role == 1).sum().item<double>() / G,
                (info.role == 2).sum().item<double>() / G, dgrad);
    std::printf("| path | forward s | backward s |\n| --- | ---: | ---: |\n");
    std::printf("| exact: CP path forward, backward from the saved bordered inverse | %.3f | %.3f |\n", exact_fwd,
                exact_bwd);
    std::printf("| autograd through a second bordered solve (same partition) | %.3f (+ solve) | %.3f |\n",
                solve_fwd, solve_bwd);
  }
  return 0;
}
