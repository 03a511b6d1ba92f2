// The LibTorch half of the wing (torch_experiments.h): installs E3, E5 and E6 into the registry
// and E1's learned-keys source, which trains (or reuses) a small hybrid LM and dumps the keys of
// one head (docs/experiments.md, E1 "Learned keys").
#include "experiments/torch_experiments.h"

#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "common.h"
#include "svattn/errors.h"
#include "experiments/e3_selective_copy/e3_selective_copy.h"
#include "experiments/e5_char_lm/e5_char_lm.h"
#include "experiments/e6_throughput/e6_throughput.h"
#include "experiments/registry.h"
#include "svattn/io.h"
#include "svattn/lm/trainer.h"

namespace svattn::experiments {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

RowMatrix to_rows(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kFloat64).contiguous();
  RowMatrix m(c.size(0), c.size(1));
  std::copy(c.data_ptr<double>(), c.data_ptr<double>() + c.numel(), m.data());
  return m;
}

/// <out_dir>/E1-keys/keys.npy of a `spec.model` hybrid trained for spec.steps on the enwik8
/// prefix (seed o.seed); reused when keys.json records the same spec and seed.
std::string trained_keys(const ExperimentOptions& o, const LearnedKeysSpec& spec) {
  const fs::path dir = fs::path(o.out_dir) / "E1-keys";
  const fs::path keys = dir / "keys.npy", meta = dir / "keys.json";
  const json want = {{"model", spec.model}, {"steps", spec.steps}, {"tokens", spec.tokens},
                     {"layer", spec.layer}, {"head", spec.head},   {"seed", o.seed},
                     {"corpus", "enwik8"}};
  std::error_code ec;
  if (fs::is_regular_file(keys, ec) && fs::is_regular_file(meta, ec)) {
    const json have = json::parse(read_text_file(meta.string()), nullptr, false);
    if (have.is_object() && have.value("spec", json()) == want) return keys.string();
  }
  fs::remove_all(dir / "run", ec);  // a run of another spec (or an interrupted one) is not reused
  ensure_dir(dir.string());
  lm::set_threads(1);
  lm::TrainOptions t;
  t.preset = spec.model;
  t.data = {"enwik8", "", o.data_dir};
  t.out = (dir / "run").string();
  t.steps = spec.steps;
  t.set("seed", o.seed);
  t.threads = 1;
  t.progress = o.progress;
  t.plot = false;
  lm::Trainer trainer(t);
  const lm::TrainResult tr = trainer.run();
  const auto [b, e] = trainer.corpus().range(lm::Split::kValid);
  if (e - b < spec.tokens)
    throw InvalidArgument("E1 keys: the validation split is shorter than keys_tokens");
  torch::Tensor tok = torch::empty({spec.tokens}, torch::kInt64);
  auto* tp = tok.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < spec.tokens; ++i)
    tp[i] = static_cast<std::int64_t>(trainer.corpus().data()[b + i]);
  torch::NoGradGuard no_grad;
  trainer.model()->eval();
  const lm::LayerKeys k = lm::learned_keys(trainer.model(), tok, spec.layer, spec.head);
  write_npy(keys.string(), to_rows(k.keys));
  write_json_file(meta.string(), {{"spec", want},
                                  {"final_valid_bpc", tr.final_valid_bpc},
                                  {"train_seconds", tr.seconds},
                                  {"parameters", tr.parameters},
                                  {"normalized", k.normalized},
                                  {"bandwidth", k.bandwidth},
                                  {"C", k.C}});
  return keys.string();
}

}  // namespace

void install_torch_experiments() {
  install_experiment("E3", e3_selective_copy::run, e3_selective_copy::preset,
                     detail::file_renderer("result", e3_selective_copy::render),
                     e3_selective_copy::ranges());
  install_experiment("E5", e5_char_lm::run, e5_char_lm::preset,
                     detail::file_renderer("result", e5_char_lm::render), e5_char_lm::ranges());
  install_experiment("E6", e6_throughput::run, e6_throughput::preset,
                     detail::file_renderer("", e6_throughput::render), e6_throughput::ranges());
  install_learned_keys_source(trained_keys);
}

}  // namespace svattn::experiments
