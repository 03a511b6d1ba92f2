// The options every `svattn memory ...` subcommand shares (memory_options.h).
#include "memory_options.h"

#include <cstdlib>

#include "cli_common.h"

namespace svattn::cli {
namespace {

// The master key (docs/store.md "Master key"): --master-key-file, else the file named by
// SVATTN_MASTER_KEY_FILE, else the key in SVATTN_MASTER_KEY (set but empty is an error, not none).
void set_master_key(const Common& c, StoreOptions& o) {
  const char* file_env = std::getenv("SVATTN_MASTER_KEY_FILE");
  if (!c.master_key_file.empty()) {
    o.master_key_file = c.master_key_file;
  } else if (file_env != nullptr && *file_env != '\0') {
    o.master_key_file = file_env;
  } else if (std::getenv("SVATTN_MASTER_KEY") != nullptr) {
    o.master_key_env = "SVATTN_MASTER_KEY";
  }
}

}  // namespace

void add_store_arg(CLI::App* sub, Common& c, bool with_memory, bool with_master_key) {
  sub->add_option("STORE", c.store, "store file (SQLite)")->required();
  if (with_memory) sub->add_option("--memory", c.memory, "memory name")->required();
  sub->add_option("--busy-timeout", c.busy_timeout_ms,
                  "milliseconds to wait for another process's lock before failing")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_json_flag(sub, c.json);
  if (!with_master_key) return;
  sub->add_option("--master-key-file", c.master_key_file,
                  "file holding the master key that wraps the data keys (64 hex digits, mode "
                  "0600); default: $SVATTN_MASTER_KEY_FILE, else $SVATTN_MASTER_KEY (the key "
                  "itself); never the key on the command line");
}

StoreOptions store_options(const Common& c, bool create) {
  StoreOptions o;
  o.create = create;
  o.busy_timeout_ms = c.busy_timeout_ms;
  set_master_key(c, o);
  return o;
}

StoreOptions read_only_options(const Common& c, bool quick_check) {
  StoreOptions o = store_options(c);
  o.read_only = true;
  o.check_on_open = quick_check;
  return o;
}

}  // namespace svattn::cli
