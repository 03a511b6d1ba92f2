// StoreOptions' master key as the key store's MasterKeySource, and its early check (docs/store.md
// "Master key").
#include "master_key.h"

namespace svattn::store_detail {

MasterKeySource master_key_source(const StoreOptions& o) {
  MasterKeySource src;
  if (!o.master_key_env.empty() && !o.master_key_file.empty()) {
    throw InvalidArgument(
        "StoreOptions.master_key_env and StoreOptions.master_key_file exclude each other (got '" +
        o.master_key_env + "' and '" + o.master_key_file + "')");
  }
  if (!o.master_key_env.empty()) {
    src.kind = MasterKeySource::Kind::kEnvironment;
    src.env_var = o.master_key_env;
  } else if (!o.master_key_file.empty()) {
    src.kind = MasterKeySource::Kind::kFile;
    src.key_file = o.master_key_file;
  }
  src.validate();
  return src;
}

void check_master_key(const StoreOptions& o) {
  const MasterKeySource src = master_key_source(o);
  if (src.kind == MasterKeySource::Kind::kNone) return;
  if (o.create && !o.encrypt) {
    throw MasterKeyError("a master key is given (" + src.describe() +
                         ") for a new plaintext store (StoreOptions.encrypt is false): a "
                         "plaintext store has no data keys to wrap");
  }
  SecretKey key;
  load_master_key(src, key);  // zeroed when `key` dies
}

}  // namespace svattn::store_detail
