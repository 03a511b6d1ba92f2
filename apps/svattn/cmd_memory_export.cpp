// `svattn memory export STORE --memory M --out DIR`: the memory's remaining tokens, stored state,
// settings and a manifest as .npy/JSON files for an auditor without svattn (docs/audit.md
// "Export"; checked by tools/svattn_verify). Exit 0 written, 2 bad input (nothing written).
#include <fmt/core.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "commands.h"
#include "memory_options.h"
#include "svattn/store_evidence.h"

namespace svattn::cli {
namespace {

struct ExportOptions {
  Common common;
  std::string out;
};

int run_export(const ExportOptions& o) {
  const MemoryExport e =
      export_memory(o.common.store, read_only_options(o.common), o.common.memory, o.out);
  if (o.common.json) {
    print_json({{"memory", e.memory},
                {"directory", e.directory},
                {"tokens", e.tokens},
                {"records", e.records},
                {"state_sha256", e.state_sha256},
                {"files", e.files}});
    return 0;
  }
  fmt::print("exported    memory '{}': {} tokens of {} records to {}\n", e.memory, e.tokens,
             e.records, e.directory);
  fmt::print("sha256      {}\n", e.state_sha256);
  fmt::print("files       {}\n", fmt::join(e.files, ", "));
  fmt::print("check       python3 -m svattn_verify {}   (tools/svattn_verify, numpy only)\n",
             e.directory);
  return 0;
}

Registrar reg("memory export", [](CLI::App& app, int& exit_code) {
  static ExportOptions opts;
  auto* sub = app.get_subcommand("memory")->add_subcommand(
      "export",
      "Write a memory's remaining tokens, stored state, settings and a manifest (.npy, JSON) to "
      "a new directory, for the independent verifier tools/svattn_verify");
  add_store_arg(sub, opts.common, true);
  sub->add_option("--out", opts.out, "new or empty directory for the files")->required();
  sub->callback([&exit_code] { exit_code = run_export(opts); });
});

}  // namespace
}  // namespace svattn::cli
