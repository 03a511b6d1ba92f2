// Process-level dispatch of the LibTorch subcommands (docs/api.md "CLI binaries"): the `svattn`
// binary links no LibTorch, so the store and core commands start in milliseconds; the subcommands
// that need LibTorch (train, eval, dump-keys, experiment, reproduce) are run by `svattn-torch`,
// installed beside it, which `svattn` executes in its own place with the same arguments.
#pragma once

namespace svattn::cli {

/// When argv names a forwarded subcommand, replaces this process by svattn-torch (found in the
/// directory of this executable) with the same arguments; returns only on failure, with the exit
/// code to use (2, with one line on stderr). Returns -1 when argv is not forwarded.
int forward_to_torch_cli(int argc, char** argv);

}  // namespace svattn::cli
