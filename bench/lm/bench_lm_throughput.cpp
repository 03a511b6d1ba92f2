// Training throughput (tokens/s of full steps: forward, backward, AdamW) of LM presets in one run,
// with the ratio to softmax-3m (docs/experiments.md "E6": the paper's hybrid is 35.8x slower than
// softmax on an
// Apple GPU; svattn's target on this CPU is <= 3x).
//
//   bench_lm_throughput [--presets a,b,...] [--steps N] [--warmup W] [--threads K]
//                       [--corpus enwik8|shakespeare] [--data-dir D] [--json FILE]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "blas_reexec.h"
#include "svattn/errors.h"
#include "svattn/lm/blas.h"
#include "svattn/lm/trainer.h"

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int run(int argc, char** argv) {
  std::vector<std::string> presets = {"softmax-3m", "swa-3m", "linear-3m", "deltanet-3m", "hybrid-3m"};
  std::int64_t steps = 5, warmup = 2;
  int threads = 2;
  std::string json_out;
  svattn::lm::DataSpec spec;
  spec.corpus = "enwik8";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw svattn::InvalidArgument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--presets") presets = split_list(next());
    else if (a == "--steps") steps = std::stoll(next());
    else if (a == "--warmup") warmup = std::stoll(next());
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--corpus") spec.corpus = next();
    else if (a == "--data-dir") spec.data_dir = next();
    else if (a == "--json") json_out = next();
    else throw svattn::InvalidArgument("unknown option " + a);
  }
  svattn::lm::set_threads(threads);
  svattn::lm::Corpus corpus = svattn::lm::Corpus::load(spec);
  std::printf("training throughput, %s, %d threads, OpenBLAS kernels %s, %lld timed steps after %lld warm-up steps\n",
              corpus.label().c_str(), threads, svattn::lm::blas_core_name().c_str(), static_cast<long long>(steps),
              static_cast<long long>(warmup));
  std::vector<svattn::lm::Throughput> rows;
  nlohmann::json j = nlohmann::json::array();
  for (const auto& name : presets) {
    const svattn::lm::Preset p = svattn::lm::make_preset(name);
    rows.push_back(svattn::lm::measure_throughput(p, corpus, steps, warmup, 1234));
    const auto& r = rows.back();
    std::fprintf(stderr, "  %s: %.0f tok/s\n", name.c_str(), r.tokens_per_second);
  }
  double softmax = 0;
  for (const auto& r : rows)
    if (r.preset == "softmax-3m") softmax = r.tokens_per_second;
  std::printf("\n| preset | parameters | batch x seq | tokens/s | s/step | slowdown vs softmax-3m | SV forward share | support |S u E| |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const svattn::lm::Preset p = svattn::lm::make_preset(r.preset);
    char slow[32] = "n/a", share[32] = "-", sup[32] = "-";
    if (softmax > 0) std::snprintf(slow, sizeof slow, "%.2fx", softmax / r.tokens_per_second);
    if (r.sv_forward_share > 0) std::snprintf(share, sizeof share, "%.0f %%", 100 * r.sv_forward_share);
    if (std::isfinite(r.support_mean)) std::snprintf(sup, sizeof sup, "%.1f", r.support_mean);
    std::printf("| %s | %lld | %lld x %lld | %.0f | %.3f | %s | %s | %s |\n", r.preset.c_str(),
                static_cast<long long>(r.parameters), static_cast<long long>(p.train.batch),
                static_cast<long long>(p.train.seq), r.tokens_per_second, r.seconds_per_step, slow, share, sup);
    j.push_back({{"preset", r.preset},
                 {"parameters", r.parameters},
                 {"tokens_per_second", r.tokens_per_second},
                 {"seconds_per_step", r.seconds_per_step},
                 {"slowdown_vs_softmax", softmax > 0 ? softmax / r.tokens_per_second : 0.0},
                 {"sv_forward_share", r.sv_forward_share},
                 {"support_mean", std::isfinite(r.support_mean) ? nlohmann::json(r.support_mean) : nlohmann::json()}});
  }
  std::printf("\npaper (E6): hybrid 9,125 tokens/s at 3.22M parameters, 35.8x slower than a softmax reference "
              "(Apple GPU, MPS); target here: <= 3x on CPU.\n");
  if (!json_out.empty()) {
    std::ofstream out(json_out);
    out << nlohmann::json{{"data", corpus.label()}, {"threads", threads}, {"blas_core", svattn::lm::blas_core_name()},
                          {"steps", steps}, {"warmup", warmup},
                          {"rows", j}}
               .dump(2)
        << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  svattn::cli::reexec_with_fast_blas_if_misdetected();
  try {
    return run(argc, argv);
  } catch (const svattn::Error& e) {
    std::fprintf(stderr, "bench_lm_throughput: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_lm_throughput: %s\n", e.what());
    return 2;
  }
}
