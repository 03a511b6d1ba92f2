// `svattn dump-keys`: learned keys of one head of a trained model (input of experiment E1).
#include <fmt/core.h>

#include <cmath>

#include "blas_reexec.h"
#include "cli_common.h"
#include "commands.h"
#include "svattn/errors.h"
#include "svattn/io.h"
#include "svattn/lm/blas.h"
#include "svattn/lm/trainer.h"

namespace svattn::cli {
namespace {

struct DumpKeysOptions {
  std::string checkpoint, out, values_out, split = "valid", corpus;
  lm::DataSpec data;
  std::int64_t layer = 0, head = 0, tokens = 1024, offset = 0;
  int threads = 2;
  bool json = false;
};

RowMatrix to_rows(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kFloat64).contiguous();
  RowMatrix m(c.size(0), c.size(1));
  std::copy(c.data_ptr<double>(), c.data_ptr<double>() + c.numel(), m.data());
  return m;
}

int run_dump_keys(DumpKeysOptions& o) {
  lm::set_threads(o.threads);
  if (o.tokens < 1) throw InvalidArgument("--tokens must be >= 1");
  if (o.offset < 0) throw InvalidArgument("--offset must be >= 0");
  const lm::Split split = lm::split_from_string(o.split);
  lm::LoadedCheckpoint ck = lm::load_checkpoint(o.checkpoint);
  lm::DataSpec spec = o.data;
  spec.corpus = o.corpus;
  lm::Corpus corpus = lm::checkpoint_corpus(ck.config, spec);
  const auto [b, e] = corpus.range(split);
  if (b + o.offset + o.tokens > e)
    throw InvalidArgument("--offset " + std::to_string(o.offset) + " + --tokens " + std::to_string(o.tokens) +
                          " exceeds the " + o.split + " split (" + std::to_string(e - b) + " bytes)");
  torch::Tensor tok = torch::empty({o.tokens}, torch::kInt64);
  for (std::int64_t i = 0; i < o.tokens; ++i) tok[i] = static_cast<std::int64_t>(corpus.data()[b + o.offset + i]);
  lm::LayerKeys k = lm::learned_keys(ck.model, tok, o.layer, o.head);
  write_npy(o.out, to_rows(k.keys));
  if (!o.values_out.empty()) write_npy(o.values_out, to_rows(k.values));
  nlohmann::json j = {{"checkpoint", ck.directory},
                      {"preset", ck.config.preset},
                      {"step", ck.step},
                      {"layer", o.layer},
                      {"head", o.head},
                      {"tokens", o.tokens},
                      {"dim", k.keys.size(1)},
                      {"data", corpus.label()},
                      {"split", o.split},
                      {"offset_in_split", o.offset},
                      {"keys", o.out},
                      {"normalized", k.normalized},
                      {"bandwidth", k.bandwidth},
                      {"C", k.C},
                      {"mu", k.mu}};
  if (!o.values_out.empty()) j["values"] = o.values_out;
  write_json(o.out + ".json", j);
  if (o.json) {
    print_json(j);
  } else {
    fmt::print("wrote {} ({} x {} keys of layer {} head {}{}); settings in {}.json\n", o.out, o.tokens,
               k.keys.size(1), o.layer, o.head,
               std::isfinite(k.bandwidth) ? fmt::format(", bandwidth {:.6g}, C {:.6g}", k.bandwidth, k.C) : "",
               o.out);
  }
  return 0;
}

Registrar reg("dump-keys", [](CLI::App& app, int& exit_code) {
  static DumpKeysOptions opts;
  DumpKeysOptions* o = &opts;
  auto* sub = app.add_subcommand("dump-keys", "Write the learned keys of one attention head as .npy (for E1)");
  sub->add_option("--checkpoint", o->checkpoint, "run directory (LATEST) or a ckpt-* directory")->required();
  sub->add_option("--layer", o->layer, "layer index")->required();
  sub->add_option("--head", o->head, "head index")->required();
  sub->add_option("--tokens", o->tokens, "number of consecutive tokens (one sequence)")->capture_default_str();
  sub->add_option("--out", o->out, "keys .npy (fp64, tokens x head dim); settings go to OUT.json")->required();
  sub->add_option("--values", o->values_out, "also write the head's values to this .npy");
  sub->add_option("--split", o->split, "train | valid | test")->capture_default_str();
  sub->add_option("--offset", o->offset, "first byte inside the split")->capture_default_str();
  sub->add_option("--corpus", o->corpus, "enwik8 | shakespeare (default: the checkpoint's)");
  sub->add_option("--data", o->data.path, "any file (default: the checkpoint's corpus)");
  sub->add_option("--data-dir", o->data.data_dir, "data directory (default $SVATTN_DATA, ../shared/data)");
  sub->add_option("--threads", o->threads, "LibTorch intra-op threads")->capture_default_str();
  add_json_flag(sub, o->json);
  sub->callback([o, &exit_code] {
    reexec_with_fast_blas_if_misdetected();
    exit_code = run_dump_keys(*o);
  });
});

}  // namespace
}  // namespace svattn::cli
