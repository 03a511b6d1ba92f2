// `svattn memory receipt STORE --memory M --record R [--format md|html] [--reason TEXT]
// [--backup FILE]... [--out FILE]`: the one-page erasure receipt a data-protection officer files
// (docs/audit.md "Erasure receipt"). Exit 0 written, 1 a check failed (the receipt is refused:
// nothing written, the broken check named on stderr), 2 bad input.
#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli_common.h"
#include "commands.h"
#include "memory_options.h"
#include "svattn/errors.h"
#include "svattn/store_evidence.h"

namespace svattn::cli {
namespace {

struct ReceiptOptions {
  Common common;
  long long record = -1;
  std::string format = "md";
  std::string reason;
  std::vector<std::string> backups;
  std::string out;
};

void write_new_file(const std::string& path, const std::string& text) {
  if (std::filesystem::exists(std::filesystem::symlink_status(path)))
    throw AlreadyExists("--out: '" + path + "' exists");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      throw IoError("--out: cannot write '" + path + "'");
    }
  }
  std::filesystem::rename(tmp, path);
}

int run_receipt(const ReceiptOptions& o) {
  if (o.record < 0) throw InvalidArgument("--record must be >= 0, got " + std::to_string(o.record));
  const ErasureReceipt r = erasure_receipt(o.common.store, read_only_options(o.common),
                                           o.common.memory, o.record, o.reason, o.backups);
  if (!r.ok()) {
    std::fprintf(stderr, "svattn: receipt refused: %s\n", r.first_failure().c_str());
    if (o.common.json) print_json(r.to_json());
    return 1;
  }
  const std::string text = o.common.json        ? r.to_json().dump(2) + "\n"
                           : o.format == "html" ? render_receipt_html(r)
                                                : render_receipt_markdown(r);
  if (o.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    write_new_file(o.out, text);
  }
  return 0;
}

Registrar reg("memory receipt", [](CLI::App& app, int& exit_code) {
  static ReceiptOptions opts;
  auto* sub = app.get_subcommand("memory")->add_subcommand(
      "receipt",
      "The erasure receipt of a forgotten record (Markdown or self-contained HTML), checked "
      "against the audit chain and the key store (exit 1: refused, naming the broken check)");
  add_store_arg(sub, opts.common, true);
  sub->add_option("--record", opts.record, "the erased record's id")->required();
  sub->add_option("--format", opts.format, "md | html")
      ->capture_default_str()
      ->check(CLI::IsMember({"md", "html"}));
  sub->add_option("--reason", opts.reason, "the request or ticket the erasure answers");
  sub->add_option("--backup", opts.backups,
                  "a backup copy of the store (memory backup) to account for; repeatable");
  sub->add_option("--out", opts.out, "write the receipt to this new file (default: stdout)");
  sub->callback([&exit_code] { exit_code = run_receipt(opts); });
});

}  // namespace
}  // namespace svattn::cli
