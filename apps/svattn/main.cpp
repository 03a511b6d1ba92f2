// svattn command-line tool: parse, call the library, print. Subcommands live in cmd_*.cpp.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <ios>
#include <new>

#include "cli_common.h"
#include "commands.h"
#include "forward.h"
#ifdef SVATTN_TORCH_PROCESS
#include "malloc_tuning.h"
#endif
#include "svattn/errors.h"

namespace svattn::cli {
std::vector<std::pair<std::string, Setup>>& registry() {
  static std::vector<std::pair<std::string, Setup>> r;
  return r;
}
Registrar::Registrar(const char* name, Setup setup) {
  registry().emplace_back(name, std::move(setup));
}
}  // namespace svattn::cli

int main(int argc, char** argv) {
#ifdef SVATTN_FORWARD_TORCH
  if (const int rc = svattn::cli::forward_to_torch_cli(argc, argv); rc >= 0) return rc;
#endif
#ifdef SVATTN_TORCH_PROCESS
  svattn::cli::keep_freed_memory_for_reuse();
#endif
  CLI::App app{
      "svattn: support-vector attention memory with certified eviction and exact forgetting"};
  app.require_subcommand(1);
  int exit_code = 0;
  // In name order, whatever the order of static initialisation: a nested subcommand's registrar
  // ("memory export") runs after its parent's ("memory").
  auto& commands = svattn::cli::registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [name, setup] : commands) setup(app, exit_code);
  svattn::cli::apply_input_policy(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "svattn: %s\n", e.what());
    return 2;
  } catch (const svattn::Error& e) {
    std::fprintf(stderr, "svattn: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // The environment, not a bug: the input asked for more memory than the machine has.
    std::fprintf(stderr, "svattn: error: out of memory\n");
    return 2;
  } catch (const std::ios_base::failure& e) {
    std::fprintf(stderr, "svattn: error: I/O failure: %s\n", e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    std::fprintf(stderr, "svattn: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    // Exit code 3 means a bug in svattn: every user or environment error is a typed svattn::Error.
    std::fprintf(stderr, "svattn: internal error (a bug, please report): %s\n", e.what());
    return 3;
  }
  return exit_code;
}
