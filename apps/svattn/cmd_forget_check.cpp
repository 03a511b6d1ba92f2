// `svattn forget-check`: adds every token to an exact memory, removes ROWS decrementally, re-solves
// from scratch on the remaining tokens and prints the removal certificate with the comparison.
#include <fmt/core.h>

#include "cli_common.h"
#include "commands.h"
#include "svattn/batch_solver.h"
#include "svattn/certificate.h"
#include "svattn/errors.h"
#include "svattn/io.h"
#include "svattn/memory.h"

namespace svattn::cli {
namespace {

struct ForgetOptions {
  TokenOptions tokens;
  ProblemOptions problem;
  std::string remove;
  int probes = 64;
  std::uint64_t seed = 1;
  bool json = false;
};


int run_forget_check(const ForgetOptions& o) {
  if (o.probes < 1 || o.probes > kMaxProbes)
    throw InvalidArgument("--probes must be in [1, " + std::to_string(kMaxProbes) + "] (got " +
                          std::to_string(o.probes) + ")");
  MemorySettings settings;
  settings.problem = o.problem.build();
  settings.validate();
  const TokenSet all = load_tokens(o.tokens);
  const std::vector<TokenId> removed = parse_rows(o.remove, all.size());

  Memory memory(settings, static_cast<int>(all.keys.cols()), static_cast<int>(all.values.cols()));
  const Stopwatch add_watch;
  memory.add_batch(all);
  const double add_seconds = add_watch.seconds();
  const State before = memory.state();

  const Stopwatch remove_watch;
  const OpDiagnostics diag = memory.remove_batch(removed);
  const double remove_seconds = remove_watch.seconds();

  // Independent timing of retraining from scratch on the remaining tokens.
  BatchSettings batch;
  batch.problem = settings.problem;
  batch.tolerances = settings.tolerances;
  const TokenSet remaining = all.without(removed);
  const Stopwatch retrain_watch;
  const BatchResult retrained = solve_batch(remaining, batch);
  const double retrain_seconds = retrain_watch.seconds();

  const RowMatrix probes = probes_around(all.keys, o.probes, o.seed);
  const RemovalCertificate typed = removal_certificate(before, memory, removed, "", diag, true, probes);
  const bool partition_match = typed.check.partition_equal;
  const std::string sha_decremental = typed.after.state_sha256;
  const std::string sha_retrained = typed.check.retrained_sha256;
  nlohmann::json cert = typed.to_json();
  cert["partition_match"] = partition_match;
  cert["max_abs_dalpha"] = typed.check.max_abs_dalpha;
  cert["max_abs_ddecision"] = typed.check.max_abs_ddecision;
  cert["max_abs_dreadout"] = typed.check.max_abs_dreadout;
  cert["state_sha256_decremental"] = sha_decremental;
  cert["state_sha256_retrained"] = sha_retrained;
  cert["timing"] = {{"add_seconds", add_seconds},
                    {"remove_seconds", remove_seconds},
                    {"retrain_seconds", retrain_seconds}};
  // The certificate's own re-solve and the timed one are the same deterministic computation.
  if (retrained.state.state_sha256 != sha_retrained) {
    throw std::runtime_error("the timed batch re-solve hashes " + retrained.state.state_sha256 +
                             " but the certificate's re-solve hashes " + sha_retrained);
  }
  const bool equal = sha_decremental == sha_retrained;

  if (o.json) {
    print_json(cert);
  } else {
    fmt::print("tokens              n = {} -> {} after removing {} ({})\n", all.size(),
               remaining.size(), removed.size(), id_list(removed));
    fmt::print("partition match     {}\n", partition_match ? "yes" : "NO");
    fmt::print("hashes equal        {}\n", equal ? "yes" : "NO");
    fmt::print("sha256 decremental  {}\n", sha_decremental);
    fmt::print("sha256 retrained    {}\n", sha_retrained);
    fmt::print("max |d alpha|       {:.3e}\n", cert["max_abs_dalpha"].get<double>());
    fmt::print("max |d decision|    {:.3e}  ({} probes)\n", cert["max_abs_ddecision"].get<double>(),
               o.probes);
    fmt::print("max |d readout|     {:.3e}\n", cert["max_abs_dreadout"].get<double>());
    fmt::print(
        "diagnostics         {} events, {} zero steps, {} repairs, {} batch fallbacks, "
        "status {}\n",
        diag.events, diag.zero_steps, diag.repairs, diag.batch_fallbacks, to_string(diag.status));
    fmt::print("timing              remove {:.6f} s, retrain {:.6f} s (ratio {:.1f}x)\n",
               remove_seconds, retrain_seconds,
               remove_seconds > 0 ? retrain_seconds / remove_seconds : 0.0);
  }
  return equal ? 0 : 1;
}

Registrar reg("forget-check", [](CLI::App& app, int& exit_code) {
  static ForgetOptions opts;  // outlives parsing: CLI11 binds to it
  ForgetOptions* o = &opts;
  auto* sub = app.add_subcommand(
      "forget-check",
      "Remove ROWS from an exact memory and compare with retraining from scratch (certificate)");
  add_token_options(sub, o->tokens);
  sub->add_option("--remove", o->remove, "ROWS to remove, e.g. '3,10-12'")->required();
  add_problem_options(sub, o->problem);
  sub->add_option("--probes", o->probes, "probe queries for the decision/readout comparison")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "seed of the probe queries")->capture_default_str();
  add_json_flag(sub, o->json);
  sub->callback([o, &exit_code] { exit_code = run_forget_check(*o); });
});

}  // namespace
}  // namespace svattn::cli
