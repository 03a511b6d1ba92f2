// `svattn solve`: batch reference solve (docs/math.md §9) of the tokens in a file.
#include <fmt/core.h>

#include "cli_common.h"
#include "commands.h"
#include "svattn/batch_solver.h"
#include "svattn/io.h"

namespace svattn::cli {
namespace {

struct SolveOptions {
  TokenOptions tokens;
  ProblemOptions problem;
  std::string exclude;
  bool json = false;
};

int run_solve(const SolveOptions& o) {
  BatchSettings settings;
  settings.problem = o.problem.build();
  settings.validate();
  TokenSet tokens = load_tokens(o.tokens);
  if (!o.exclude.empty()) {
    tokens = tokens.without(parse_rows(o.exclude, tokens.size()));
  }
  const Stopwatch watch;
  const BatchResult result = solve_batch(tokens, settings);
  const double seconds = watch.seconds();
  if (o.json) {
    print_json(state_to_json(result.state));
  } else {
    print_state_summary(result.state);
    fmt::print("solver      {} SMO iterations, {} refinement repairs, {:.3f} s\n",
               result.diagnostics.smo_iterations, result.diagnostics.refine_iterations, seconds);
  }
  return exit_code_for(result.state.status);
}

Registrar reg("solve", [](CLI::App& app, int& exit_code) {
  static SolveOptions opts;  // outlives parsing: CLI11 binds to it
  SolveOptions* o = &opts;
  auto* sub = app.add_subcommand(
      "solve", "Batch-solve the SVDD dual on the tokens of a file and print the canonical state");
  add_token_options(sub, o->tokens);
  sub->add_option("--exclude", o->exclude,
                  "ROWS to leave out, e.g. '3,10-12' (the others keep their row index as id)");
  add_problem_options(sub, o->problem);
  add_json_flag(sub, o->json);
  sub->callback([o, &exit_code] { exit_code = run_solve(*o); });
});

}  // namespace
}  // namespace svattn::cli
