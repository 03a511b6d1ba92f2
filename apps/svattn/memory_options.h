// The options every `svattn memory ...` subcommand shares (the store, the memory, the busy timeout,
// --json, the master key; docs/store.md "Master key"), for cmd_memory*.cpp.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "svattn/store.h"

namespace svattn::cli {

struct Common {
  std::string store;
  std::string memory;
  int busy_timeout_ms = 5000;
  bool json = false;
  std::string master_key_file;  // --master-key-file (else SVATTN_MASTER_KEY_FILE / _KEY)
};

/// STORE, --memory (with_memory), --busy-timeout, --json and --master-key-file
/// (with_master_key): backup copies the data file only and reads no key.
void add_store_arg(CLI::App* sub, Common& c, bool with_memory, bool with_master_key = true);

/// The options of a writing open (create: make the store when missing).
StoreOptions store_options(const Common& c, bool create = false);

/// verify, show, audit, query, export and receipt never write: they work on files the user cannot
/// write. No command runs the O(file) quick_check on open (StoreOptions::check_on_open, off by
/// default): pages they read are still checked by SQLite, and `verify` runs the full
/// integrity_check.
StoreOptions read_only_options(const Common& c, bool quick_check = false);

}  // namespace svattn::cli
