// The master key a store is opened with (docs/store.md "Master key"): StoreOptions' environment
// variable or key file as the key store's MasterKeySource, checked before any file is written.
// Private to the store.
#pragma once
#include "crypto.h"
#include "svattn/store.h"

namespace svattn::store_detail {

inline bool master_key_given(const StoreOptions& o) {
  return !o.master_key_env.empty() || !o.master_key_file.empty();
}

/// The source StoreOptions names. InvalidArgument naming the field when both are set or the
/// variable name is not valid.
MasterKeySource master_key_source(const StoreOptions& o);

/// Loads the master key once and discards it, so that a missing, unreadable or malformed key is a
/// MasterKeyError before the store's files are opened; also refuses a master key for a new
/// plaintext store (options.create with encrypt false).
void check_master_key(const StoreOptions& o);

}  // namespace svattn::store_detail
