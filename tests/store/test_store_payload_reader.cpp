// The payload codec as a component (src/store/payload_reader.h) on a real connection: token rows
// in an SQLite file (unit) and a PostgreSQL schema (label postgres), their data keys in the
// backend's key store (stores().keys). Plaintext rows and sealed token messages read back
// bit-exact; a sealed row bound to another position fails authentication (RecordTampered); a row
// whose key was destroyed reads as RecordShredded; a wrong size names the token.
#include <cstring>
#include <string>
#include <vector>

#include "db_test_util.h"
#include "store/payload_reader.h"

namespace svattn {
namespace {

using store_detail::Database;
using store_detail::KeyStore;
using store_detail::PayloadColumns;
using store_detail::PayloadReader;
using store_detail::RecordAad;
using store_detail::RecordField;
using store_detail::Sealer;
using store_detail::Statement;

constexpr int kDim = 3;
constexpr int kValueDim = 2;
constexpr std::int64_t kMemory = 7;

class PayloadReaderBackends : public store_test::StoreOnBackends {
 protected:
  void SetUp() override {
    store_test::StoreOnBackends::SetUp();
    if (IsSkipped()) return;
    db_ = store_test::open_database(stores(), "p");
    db_.exec_ddl(pg()
                     ? "CREATE TABLE t(id BIGINT PRIMARY KEY, key BYTEA, value BYTEA, key_id TEXT)"
                     : "CREATE TABLE t(id INTEGER PRIMARY KEY, key BLOB, value BLOB, key_id TEXT)");
    store_detail::KeyStoreOptions o;
    o.create = true;
    keys_ = stores().key_store("p", o);
  }
  void insert(TokenId id, const std::vector<std::uint8_t>& k, const std::vector<std::uint8_t>& v,
              const std::string& key_id) {
    Statement ins(db_.handle(), "INSERT INTO t(id, key, value, key_id) VALUES (?1, ?2, ?3, ?4)");
    ins.bind(1, static_cast<std::int64_t>(id)).bind_blob(2, k.data(), k.size());
    ins.bind_blob(3, v.data(), v.size());
    if (!key_id.empty()) ins.bind(4, key_id);
    ins.run();
  }
  // Reads token `id` through a fresh reader into key/value.
  void read(TokenId id, double* key, double* value) {
    PayloadReader r(keys_.get(), path_, kMemory);
    Statement q(db_.handle(), "SELECT id, key, value, key_id FROM t WHERE id = ?1");
    q.bind(1, static_cast<std::int64_t>(id));
    ASSERT_TRUE(q.step());
    r.read_token(q, PayloadColumns{1, 2, kDim, kValueDim}, 3, key, value, id);
  }
  static std::vector<std::uint8_t> bytes_of(const double* p, int n) {
    const auto* b = reinterpret_cast<const std::uint8_t*>(p);
    return std::vector<std::uint8_t>(b, b + n * sizeof(double));
  }
  Database db_;
  std::unique_ptr<KeyStore> keys_;
  std::string path_ = "payload-test";
};

TEST_P(PayloadReaderBackends, PlaintextAndSealedRowsReadBackBitExact) {
  const double k[kDim] = {1.5, -0.0, 1e-300}, v[kValueDim] = {3.25, -7.0};
  const TokenId plain = store_token_id(1, 0), sealed = store_token_id(2, 5);
  insert(plain, bytes_of(k, kDim), bytes_of(v, kValueDim), "");
  const auto dk = keys_->create_key({kMemory, 2});
  Sealer s(dk.key);
  std::vector<std::uint8_t> kb, vb;
  s.seal_token({kMemory, 2, 5, RecordField::kToken}, k, sizeof k, v, sizeof v, kb, vb);
  insert(sealed, kb, vb, dk.key_id);
  for (TokenId id : {plain, sealed}) {
    double key[kDim] = {}, value[kValueDim] = {};
    read(id, key, value);
    EXPECT_EQ(std::memcmp(key, k, sizeof k), 0) << id;
    EXPECT_EQ(std::memcmp(value, v, sizeof v), 0) << id;
  }
}

TEST_P(PayloadReaderBackends, WrongPositionWrongSizeAndDestroyedKeyAreRefused) {
  const double k[kDim] = {1, 2, 3}, v[kValueDim] = {4, 5};
  const auto dk = keys_->create_key({kMemory, 3});
  Sealer s(dk.key);
  std::vector<std::uint8_t> kb, vb;
  s.seal_token({kMemory, 3, 0, RecordField::kToken}, k, sizeof k, v, sizeof v, kb, vb);
  const TokenId moved = store_token_id(3, 1);  // sealed for position 0, stored at position 1
  insert(moved, kb, vb, dk.key_id);
  double key[kDim], value[kValueDim];
  EXPECT_THROW(read(moved, key, value), store_detail::RecordTampered);
  const TokenId short_row = store_token_id(4, 0);
  insert(short_row, std::vector<std::uint8_t>(8), bytes_of(v, kValueDim), "");
  try {
    read(short_row, key, value);
    ADD_FAILURE() << "a short key blob was read";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("token " + std::to_string(short_row)), std::string::npos);
  }
  keys_->destroy(dk.key_id);
  EXPECT_THROW(read(moved, key, value), store_detail::RecordShredded);
}

SVATTN_ON_ALL_BACKENDS(PayloadReaderBackends);

}  // namespace
}  // namespace svattn
