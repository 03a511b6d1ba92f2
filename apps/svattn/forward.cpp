// Forwarding of the LibTorch subcommands from `svattn` to `svattn-torch` (see forward.h), and
// their entries in `svattn --help`. Compiled only into the LibTorch-free `svattn` of a build that
// also builds `svattn-torch`.
#include "forward.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "commands.h"

namespace svattn::cli {

namespace {

struct Forwarded {
  const char* name;
  const char* description;
};

// The subcommands svattn-torch runs, with the one-line description `svattn --help` shows.
constexpr std::array<Forwarded, 5> kForwarded{{
    {"train", "Train a character LM preset (LibTorch; run by svattn-torch)"},
    {"eval", "Bits per byte of a checkpoint on a split (LibTorch; run by svattn-torch)"},
    {"dump-keys", "Write the learned keys of one attention head as .npy (LibTorch; svattn-torch)"},
    {"experiment", "Run a paper experiment E1-E7 (run by svattn-torch)"},
    {"reproduce", "Run the paper's experiments E1-E7 (run by svattn-torch)"},
}};

bool is_forwarded(const char* arg) {
  for (const auto& f : kForwarded)
    if (std::strcmp(arg, f.name) == 0) return true;
  return false;
}

// Help entries only: the process is replaced before CLI11 parses a forwarded subcommand.
Registrar reg("forwarded", [](CLI::App& app, int&) {
  for (const auto& f : kForwarded) app.add_subcommand(f.name, f.description)->allow_extras();
});

}  // namespace

int forward_to_torch_cli(int argc, char** argv) {
  if (argc < 2 || !is_forwarded(argv[1])) return -1;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    std::fprintf(stderr, "svattn: error: cannot locate this executable to find svattn-torch: %s\n",
                 ec.message().c_str());
    return 2;
  }
  const std::string torch_cli = (self.parent_path() / "svattn-torch").string();
  execv(torch_cli.c_str(), argv);
  std::fprintf(stderr, "svattn: error: '%s' needs %s (the LibTorch build of the CLI): %s\n",
               argv[1], torch_cli.c_str(), std::strerror(errno));
  return 2;
}

}  // namespace svattn::cli
