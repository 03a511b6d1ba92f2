// `svattn eval`: bits per byte of a checkpoint on a split (deterministic fixed windows).
#include <fmt/core.h>

#include "blas_reexec.h"
#include "cli_common.h"
#include "commands.h"
#include "svattn/errors.h"
#include "svattn/lm/blas.h"
#include "svattn/lm/trainer.h"

namespace svattn::cli {
namespace {

struct EvalCliOptions {
  std::string checkpoint, split = "test", corpus, global_path;
  lm::DataSpec data;
  std::int64_t windows = 0, seq = 0, batch = 16;
  int threads = 2;
  bool check_agreement = false, certify = false, json = false;
  bool seq_given = false;  // --seq appeared on the command line
};

double verified_share(const layers::AttentionDiagnostics& d) {
  return d.certified_units > 0
             ? static_cast<double>(d.verified_units) / static_cast<double>(d.certified_units)
             : std::nan("");
}

int run_eval(EvalCliOptions& o) {
  lm::set_threads(o.threads);
  const lm::Split split = lm::split_from_string(o.split);
  if (o.windows < 0) throw InvalidArgument("--windows must be >= 0");
  if (o.seq_given && o.seq < 2)
    throw InvalidArgument("--seq must be >= 2 (a window predicts seq bytes), got " +
                          std::to_string(o.seq));
  if (o.batch < 1 || o.batch > 4096)
    throw InvalidArgument("--batch must be in [1, 4096], got " + std::to_string(o.batch));
  if (!o.global_path.empty()) layers::global_path_from_string(o.global_path);  // validates
  lm::LoadedCheckpoint ck = lm::load_checkpoint(o.checkpoint, [&](layers::LmConfig& c) {
    if (!o.global_path.empty())
      c.attention.hybrid.path = layers::global_path_from_string(o.global_path);
    if (o.check_agreement) c.attention.hybrid.check_agreement = true;
    if (o.certify && c.attention.type == layers::AttentionType::kHybrid) {
      if (c.attention.hybrid.path != layers::GlobalPath::kExact)
        throw InvalidArgument(
            "--certify needs the exact path (add --global-path exact): the hybrid runs the " +
            layers::to_string(c.attention.hybrid.path) +
            " path, whose memories carry no certificate");
      c.attention.hybrid.certify = true;
    }
  });
  if (o.check_agreement && ck.model->config().attention.type != layers::AttentionType::kHybrid)
    throw InvalidArgument("--check-agreement needs a hybrid model; checkpoint " + ck.directory +
                          " holds a " + layers::to_string(ck.model->config().attention.type) +
                          " model");
  if (o.certify && ck.model->config().attention.type != layers::AttentionType::kHybrid)
    throw InvalidArgument("--certify needs a hybrid model; checkpoint " + ck.directory +
                          " holds a " + layers::to_string(ck.model->config().attention.type) +
                          " model");
  if (!o.global_path.empty() && ck.model->config().attention.type != layers::AttentionType::kHybrid)
    throw InvalidArgument("--global-path needs a hybrid model; checkpoint " + ck.directory +
                          " holds a " + layers::to_string(ck.model->config().attention.type) +
                          " model");
  lm::DataSpec spec = o.data;
  spec.corpus = o.corpus;
  if (!o.corpus.empty() && o.corpus != "enwik8" && o.corpus != "shakespeare")
    throw InvalidArgument("--corpus " + o.corpus + ": expected enwik8 or shakespeare");
  lm::Corpus corpus = lm::checkpoint_corpus(ck.config, spec);
  lm::EvalOptions eo;
  eo.split = split;
  eo.seq = o.seq_given ? o.seq : ck.config.train.seq;
  eo.windows = o.windows;
  eo.batch = o.batch;
  lm::EvalResult r = lm::evaluate(ck.model, corpus, eo);
  const bool hybrid = ck.model->config().attention.type == layers::AttentionType::kHybrid;
  nlohmann::json j = {{"checkpoint", ck.directory},
                      {"preset", ck.config.preset},
                      {"step", ck.step},
                      {"data", corpus.label()},
                      {"file", corpus.path()},
                      {"split", lm::to_string(split)},
                      {"bpc", r.bpc},
                      {"nll", r.nll},
                      {"targets", r.targets},
                      {"windows", r.windows},
                      {"seq", r.seq},
                      {"batch", eo.batch},
                      {"threads", o.threads},
                      {"seconds", r.seconds}};
  if (hybrid) {
    nlohmann::json layers_j = nlohmann::json::array();
    for (const auto& d : r.diagnostics) {
      nlohmann::json l = {{"support_mean", d.support_mean},
                          {"support_per_head", d.support_per_head},
                          {"gate_memory_share", d.gate_mean}};
      if (o.check_agreement) {
        l["partition_agreement"] = d.partition_agreement;
        l["agreement_units"] = d.agreement_units;
        l["coefficient_error"] = d.coefficient_error;
      }
      if (o.certify) {
        l["certified_memories"] = d.certified_units;
        l["verified_memories"] = d.verified_units;
        l["verified_share"] = verified_share(d);
      }
      layers_j.push_back(l);
    }
    j["global_path"] = layers::to_string(ck.model->config().attention.hybrid.path);
    j["layers"] = layers_j;
  }
  if (o.json) {
    print_json(j);
  } else {
    fmt::print(
        "{} BPC {:.4f} ({}, {} split: {} windows of {} bytes, {} targets; step {} of {}; "
        "{:.1f}s)\n",
        lm::to_string(split), r.bpc, corpus.label(), lm::to_string(split), r.windows, r.seq,
        r.targets, ck.step, ck.config.preset, r.seconds);
    if (hybrid)
      for (std::size_t l = 0; l < r.diagnostics.size(); ++l) {
        const auto& d = r.diagnostics[l];
        fmt::print("  layer {}: support |S u E| {:.1f}, gate memory share {:.3f}", l,
                   d.support_mean, d.gate_mean);
        if (o.check_agreement)
          fmt::print(
              ", batched/exact partition agreement {:.4f} over {} units, max |dalpha| {:.2e}",
              d.partition_agreement, d.agreement_units, d.coefficient_error);
        if (o.certify)
          fmt::print(", certificates verified {} of {} memories ({:.4f})", d.verified_units,
                     d.certified_units, verified_share(d));
        fmt::print("\n");
      }
  }
  if (o.certify)
    for (const auto& d : r.diagnostics)
      if (d.verified_units != d.certified_units) return 1;  // a memory failed its certificate
  return 0;
}

Registrar reg("eval", [](CLI::App& app, int& exit_code) {
  static EvalCliOptions opts;
  EvalCliOptions* o = &opts;
  auto* sub =
      app.add_subcommand("eval", "Bits per byte of a checkpoint on a split (fixed windows)");
  sub->add_option("--checkpoint", o->checkpoint, "run directory (LATEST) or a ckpt-* directory")
      ->required();
  sub->add_option("--split", o->split, "test | valid | train")->capture_default_str();
  sub->add_option("--corpus", o->corpus, "enwik8 | shakespeare (default: the checkpoint's)");
  sub->add_option("--data", o->data.path, "any file (default: the checkpoint's corpus)");
  sub->add_option("--data-dir", o->data.data_dir,
                  "data directory (default $SVATTN_DATA, ../shared/data)");
  sub->add_option("--windows", o->windows,
                  "evaluation windows, evenly spaced (0: every window of the split)")
      ->capture_default_str();
  CLI::Option* seq =
      sub->add_option("--seq", o->seq, "window length >= 2 (default: the training seq)");
  sub->add_option("--batch", o->batch, "windows per forward")->capture_default_str();
  sub->add_option("--global-path", o->global_path,
                  "hybrid: exact | batched (default: the checkpoint's)");
  sub->add_flag("--check-agreement", o->check_agreement,
                "hybrid: also solve every memory with the other path (batched or exact) and "
                "report the batched/exact partition agreement");
  sub->add_flag("--certify", o->certify,
                "hybrid exact path: check every memory's state with the independent verifier and "
                "report the share verified (exit 1 if any memory fails)");
  sub->add_option("--threads", o->threads, "LibTorch intra-op threads")->capture_default_str();
  add_json_flag(sub, o->json);
  sub->callback([o, seq, &exit_code] {
    o->seq_given = seq->count() > 0;
    reexec_with_fast_blas_if_misdetected();
    exit_code = run_eval(*o);
  });
});

}  // namespace
}  // namespace svattn::cli
