// The store's exception types (docs/store.md "Errors"): what a store operation throws for a
// reason outside the caller's arguments. Included by store.h; the store's database layer uses it
// alone (src/store/db/database.h), without the rest of the public API.
#pragma once
#include "svattn/errors.h"

namespace svattn {

/// A store operation failed for a reason outside the caller's arguments (SQLite error, I/O error).
/// Malformed files raise FormatError; unknown/duplicate names NotFound/AlreadyExists; bad arguments
/// InvalidArgument.
class StoreError : public Error {
 public:
  using Error::Error;
};
/// The store stayed locked by another connection for longer than the busy timeout.
class StoreBusy : public StoreError {
 public:
  using StoreError::StoreError;
};
/// The disk (or the process's file-size limit) is full; the operation was rolled back.
class StoreFull : public StoreError {
 public:
  using StoreError::StoreError;
};
/// The master key (StoreOptions::master_key_env / master_key_file) is missing, malformed,
/// unreadable, not the key the key store was created with, or given for a store whose data keys
/// are not wrapped (docs/store.md "Master key"). Nothing was written; the CLI exits 2.
class MasterKeyError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

}  // namespace svattn
