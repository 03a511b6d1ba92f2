// Subcommand registry: each cmd_*.cpp defines a static Registrar that adds its subcommand to the
// CLI11 app. A subcommand's callback returns the process exit code (0 ok, 1 check failed,
// 2 bad input); exceptions of type svattn::Error are turned into exit 2 with one line on stderr,
// and an internal invariant failure (std::logic_error from SVATTN_ASSERT) into exit 3.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace svattn::cli {

using Setup = std::function<void(CLI::App& app, int& exit_code)>;

struct Registrar {
  Registrar(const char* name, Setup setup);
};

std::vector<std::pair<std::string, Setup>>& registry();

}  // namespace svattn::cli
