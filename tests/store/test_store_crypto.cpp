// Encryption at rest building blocks (docs/store.md "Encryption at rest (building blocks)"):
// AES-256-GCM seal/open round trips and tamper refusal, key wrapping, master-key loading.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "store/crypto.h"
#include "store_test_util.h"

namespace svattn::store_detail {
namespace {

using store_test::TempDir;

std::vector<std::uint8_t> fp64_bytes(int rows, int cols, std::uint64_t seed) {
  const RowMatrix m = store_test::random_keys(rows, cols, seed);
  std::vector<std::uint8_t> b(static_cast<std::size_t>(m.size()) * sizeof(double));
  std::memcpy(b.data(), m.data(), b.size());
  return b;
}

RecordAad aad(std::int64_t mem, std::int64_t rec, std::int64_t pos,
              RecordField f = RecordField::kKey) {
  RecordAad a;
  a.memory_id = mem;
  a.record_id = rec;
  a.position = pos;
  a.field = f;
  return a;
}

std::string hex_of(const SecretKey& k) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < kKeyBytes; ++i) {
    s.push_back(kHex[k.data()[i] >> 4]);
    s.push_back(kHex[k.data()[i] & 15]);
  }
  return s;
}

bool same_key(const SecretKey& a, const SecretKey& b) {
  return std::memcmp(a.data(), b.data(), kKeyBytes) == 0;
}

bool all_zero(const SecretKey& k) {
  for (std::size_t i = 0; i < kKeyBytes; ++i) {
    if (k.data()[i] != 0) return false;
  }
  return true;
}

TEST(StoreCrypto, RoundTripIsExactAtEverySize) {
  const SecretKey key = SecretKey::random();
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{512},
                              std::size_t{24 * 64 * 8}, std::size_t{1} << 20}) {
    std::vector<std::uint8_t> plain = fp64_bytes(1, static_cast<int>((n + 7) / 8) + 1, n);
    plain.resize(n);
    const RecordAad a = aad(3, 7, 2);
    const std::vector<std::uint8_t> sealed = seal(key, a, plain.data(), plain.size());
    ASSERT_EQ(sealed.size(), n + kSealOverhead);
    EXPECT_EQ(sealed[0], kSealVersion);
    EXPECT_EQ(opened_size(a, sealed.size()), n);
    EXPECT_EQ(open(key, a, sealed.data(), sealed.size()), plain) << "n=" << n;
  }
}

TEST(StoreCrypto, SealingIsRandomisedButOpensToIdenticalBytes) {
  const SecretKey key = SecretKey::random();
  const std::vector<std::uint8_t> plain = fp64_bytes(24, 64, 11);
  const RecordAad a = aad(1, 1, 0);
  std::set<std::vector<std::uint8_t>> nonces;
  std::set<std::vector<std::uint8_t>> blobs;
  for (int i = 0; i < 64; ++i) {
    const std::vector<std::uint8_t> s = seal(key, a, plain.data(), plain.size());
    nonces.insert(std::vector<std::uint8_t>(s.begin() + 1, s.begin() + 1 + kNonceBytes));
    blobs.insert(s);
    EXPECT_EQ(open(key, a, s.data(), s.size()), plain);
    // No 8-byte fp64 coordinate of the plaintext appears in the sealed blob.
    for (std::size_t off = 0; off + 8 <= plain.size(); off += 8) {
      ASSERT_EQ(store_test::count_occurrences(s, plain.data() + off, 8), 0u) << off;
    }
  }
  EXPECT_EQ(nonces.size(), 64u);
  EXPECT_EQ(blobs.size(), 64u);
}

TEST(StoreCrypto, ASealerNeverRepeatsANonceAndItsBlobsOpenExactly) {
  const SecretKey key = SecretKey::random();
  const std::vector<std::uint8_t> plain = fp64_bytes(48, 64, 12);  // 48 fields of 512 bytes
  std::set<std::vector<std::uint8_t>> nonces;
  std::vector<std::vector<std::uint8_t>> blobs(48);
  for (int rep = 0; rep < 4; ++rep) {
    Sealer sealer(key);
    for (int f = 0; f < 48; ++f) {
      sealer.seal_into(aad(1, 9, f / 2, f % 2 ? RecordField::kValue : RecordField::kKey),
                       plain.data() + 512 * f, 512, blobs[f]);
      nonces.insert(
          std::vector<std::uint8_t>(blobs[f].begin() + 1, blobs[f].begin() + 1 + kNonceBytes));
    }
    Opener opener(key);
    std::vector<std::uint8_t> out(plain.size(), 0);
    for (int f = 0; f < 48; ++f) {
      opener.open_into(aad(1, 9, f / 2, f % 2 ? RecordField::kValue : RecordField::kKey),
                       blobs[f].data(), blobs[f].size(), out.data() + 512 * f, 512);
    }
    EXPECT_EQ(out, plain);
    // A reused opener still refuses a blob opened at the wrong place, then opens the next one.
    EXPECT_THROW(opener.open_into(aad(1, 9, 1, RecordField::kKey), blobs[0].data(), blobs[0].size(),
                                  out.data(), 512),
                 RecordTampered);
    opener.open_into(aad(1, 9, 0, RecordField::kKey), blobs[0].data(), blobs[0].size(), out.data(),
                     512);
    EXPECT_EQ(std::memcmp(out.data(), plain.data(), 512), 0);
  }
  EXPECT_EQ(nonces.size(), 4u * 48u);
}

TEST(StoreCrypto, EveryAlteredByteIsRefusedNamingTheRecord) {
  const SecretKey key = SecretKey::random();
  const std::vector<std::uint8_t> plain = fp64_bytes(2, 8, 5);  // 128 bytes
  const RecordAad a = aad(4, 77, 9, RecordField::kValue);
  const std::vector<std::uint8_t> sealed = seal(key, a, plain.data(), plain.size());
  // Every byte: version (0), nonce (1..12), ciphertext, tag (last 16).
  for (std::size_t i = 0; i < sealed.size(); ++i) {
    std::vector<std::uint8_t> t = sealed;
    t[i] ^= 0x01;
    std::vector<std::uint8_t> out(plain.size(), 0xAB);
    try {
      open_into(key, a, t.data(), t.size(), out.data(), out.size());
      ADD_FAILURE() << "altered byte " << i << " was accepted";
    } catch (const RecordTampered& e) {
      EXPECT_NE(std::string(e.what()).find("memory 4, record 77, position 9, value"),
                std::string::npos)
          << e.what();
      EXPECT_EQ(e.aad().record_id, 77);
      if (i > 0) {
        // A failed authentication leaves zeros, never unauthenticated plaintext.
        EXPECT_EQ(out, std::vector<std::uint8_t>(plain.size(), 0)) << i;
      }
    }
  }
  // Truncation, down to nothing.
  for (std::size_t n : {sealed.size() - 1, kSealOverhead, kSealOverhead - 1, std::size_t{0}}) {
    EXPECT_THROW(open(key, a, sealed.data(), n), RecordTampered) << n;
  }
}

TEST(StoreCrypto, CiphertextMovedToAnotherPlaceIsRefused) {
  const SecretKey key = SecretKey::random();
  const std::vector<std::uint8_t> plain = fp64_bytes(1, 64, 6);
  const RecordAad home = aad(2, 10, 3, RecordField::kKey);
  const std::vector<std::uint8_t> s = seal(key, home, plain.data(), plain.size());
  const RecordAad elsewhere[] = {aad(1, 10, 3),  aad(2, 11, 3),
                                 aad(2, 10, 4),  aad(2, 10, 3, RecordField::kValue),
                                 aad(-2, 10, 3), aad(2, 10 + (std::int64_t{1} << 32), 3)};
  for (const RecordAad& other : elsewhere) {
    try {
      open(key, other, s.data(), s.size());
      ADD_FAILURE() << "accepted at " << other.describe();
    } catch (const RecordTampered& e) {
      EXPECT_NE(std::string(e.what()).find(other.describe()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("moved"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(open(key, home, s.data(), s.size()), plain);
  // Another record's data key (ciphertext and key moved together to a record with its own key).
  EXPECT_THROW(open(SecretKey::random(), home, s.data(), s.size()), RecordTampered);
}

// A token message (schema 7): a token's key and value as one GCM message split over two columns.
// Round trip at several sizes (an empty value included), every altered byte of either column
// refused with both buffers zeroed, and the message refused at any other place or as a field;
// opened in place and straight from the two columns into other buffers.
TEST(StoreCrypto, ATokenMessageOpensExactlyAndRefusesEveryAlteredByte) {
  const SecretKey key = SecretKey::random();
  for (const bool in_place : {true, false})
    for (const int vd : {0, 3, 64}) {
      const std::vector<std::uint8_t> k = fp64_bytes(1, 64, 40 + vd);
      const std::vector<std::uint8_t> v = fp64_bytes(1, std::max(vd, 1), 50 + vd);
      const std::size_t kn = k.size();
      const std::size_t vn = static_cast<std::size_t>(vd) * 8;
      const RecordAad home = aad(3, 21, 5, RecordField::kToken);
      Sealer sealer(key);
      std::vector<std::uint8_t> kc, vc;
      sealer.seal_token(home, k.data(), kn, v.data(), vn, kc, vc);
      ASSERT_EQ(kc.size(), kn + kTokenKeyOverhead);
      ASSERT_EQ(vc.size(), vn + kTokenValueOverhead);
      EXPECT_EQ(kc[0], kTokenSealVersion);
      EXPECT_EQ(kc.size() + vc.size(), kn + vn + kSealOverhead);  // one message's overhead
      // Opens one token message into the two buffers; true if authentic.
      const auto open_token = [&](const RecordAad& at, const std::vector<std::uint8_t>& kcol,
                                  const std::vector<std::uint8_t>& vcol,
                                  std::vector<std::uint8_t>& ko, std::vector<std::uint8_t>& vo) {
        Opener op(key);
        try {
          if (in_place) {
            ko.assign(kcol.begin() + kTokenKeyOverhead, kcol.end());
            vo.assign(vcol.begin(), vcol.end() - kTokenValueOverhead);
            op.open_token_in_place(at, kcol.data(), vcol.data() + vn, ko.data(), kn, vo.data(), vn);
          } else {
            ko.assign(kn, 0xAB);
            vo.assign(vn, 0xAB);
            op.open_token(at, kcol.data(), vcol.data() + vn,
                          {kcol.data() + kTokenKeyOverhead, ko.data(), kn},
                          {vcol.data(), vo.data(), vn});
          }
          return true;
        } catch (const RecordTampered& e) {
          EXPECT_NE(std::string(e.what()).find(at.describe()), std::string::npos) << e.what();
          return false;
        }
      };
      std::vector<std::uint8_t> ko, vo;
      ASSERT_TRUE(open_token(home, kc, vc, ko, vo));
      EXPECT_EQ(ko, k);
      EXPECT_EQ(vo,
                std::vector<std::uint8_t>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(vn)));
      for (std::size_t i = 0; i < kc.size() + vc.size(); ++i) {
        std::vector<std::uint8_t> kt = kc, vt = vc;
        (i < kc.size() ? kt[i] : vt[i - kc.size()]) ^= 0x01;
        EXPECT_FALSE(open_token(home, kt, vt, ko, vo)) << "altered byte " << i;
        EXPECT_EQ(ko, std::vector<std::uint8_t>(kn, 0)) << i;  // zeroed, never unauthenticated
        EXPECT_EQ(vo, std::vector<std::uint8_t>(vn, 0)) << i;
      }
      for (const RecordAad& other :
           {aad(3, 21, 6, RecordField::kToken), aad(3, 22, 5, RecordField::kToken),
            aad(4, 21, 5, RecordField::kToken), aad(3, 21, 5, RecordField::kKey)}) {
        EXPECT_FALSE(open_token(other, kc, vc, ko, vo)) << other.describe();
      }
    }
}

TEST(StoreCrypto, AssociatedDataHasAFixedWidthEncoding) {
  EXPECT_EQ(aad(1, 2, 3).encode().size(), 41u);
  EXPECT_NE(aad(1, 23, 4).encode(), aad(12, 3, 4).encode());
  EXPECT_NE(aad(1, 2, 3, RecordField::kKey).encode(), aad(1, 2, 3, RecordField::kValue).encode());
  EXPECT_NE(aad(1, 2, 3, RecordField::kKey).encode(), aad(1, 2, 3, RecordField::kToken).encode());
  EXPECT_EQ(aad(1, 2, 3).encode(), aad(1, 2, 3).encode());
}

TEST(StoreCrypto, OpenIntoChecksTheOutputSize) {
  const SecretKey key = SecretKey::random();
  const std::vector<std::uint8_t> plain(40, 7);
  const std::vector<std::uint8_t> s = seal(key, aad(0, 0, 0), plain.data(), plain.size());
  std::vector<std::uint8_t> out(39);
  EXPECT_THROW(open_into(key, aad(0, 0, 0), s.data(), s.size(), out.data(), out.size()),
               InvalidArgument);
}

TEST(StoreCrypto, SecretKeysAreRandomAndZeroedWhenMovedOrCleared) {
  SecretKey a = SecretKey::random();
  const SecretKey b = SecretKey::random();
  EXPECT_FALSE(same_key(a, b));
  EXPECT_FALSE(all_zero(a));
  const SecretKey copy = a.clone();
  EXPECT_TRUE(same_key(a, copy));
  SecretKey moved = std::move(a);
  EXPECT_TRUE(same_key(moved, copy));
  EXPECT_TRUE(all_zero(a));  // NOLINT(bugprone-use-after-move): the moved-from key is zeroed
  moved.clear();
  EXPECT_TRUE(all_zero(moved));
  std::uint8_t raw[31] = {};
  EXPECT_THROW(SecretKey::from_bytes(raw, sizeof raw), InvalidArgument);
}

TEST(StoreCrypto, WrappedKeysUnwrapOnlyUnderTheirMasterKeyAndId) {
  const SecretKey master = SecretKey::random();
  const SecretKey data = SecretKey::random();
  const std::vector<std::uint8_t> w = wrap_key(master, "k1", data);
  ASSERT_EQ(w.size(), kWrappedKeyBytes);
  EXPECT_EQ(store_test::count_occurrences(w, data.data(), 8), 0u);
  EXPECT_TRUE(same_key(unwrap_key(master, "k1", w), data));
  EXPECT_NE(wrap_key(master, "k1", data), w);  // fresh nonce per wrap
  EXPECT_THROW(unwrap_key(SecretKey::random(), "k1", w), MasterKeyError);
  EXPECT_THROW(unwrap_key(master, "k2", w), MasterKeyError);  // moved to another key row
  for (std::size_t i = 0; i < w.size(); ++i) {
    std::vector<std::uint8_t> t = w;
    t[i] ^= 0x80;
    EXPECT_THROW(unwrap_key(master, "k1", t), MasterKeyError) << i;
  }
  EXPECT_THROW(unwrap_key(master, "k1", std::vector<std::uint8_t>(w.begin(), w.end() - 1)),
               MasterKeyError);
  EXPECT_THROW(wrap_key(master, "", data), InvalidArgument);
}

TEST(StoreCrypto, MasterKeySourceValidateNamesTheField) {
  MasterKeySource s;
  EXPECT_NO_THROW(s.validate());
  s.kind = MasterKeySource::Kind::kEnvironment;
  EXPECT_NO_THROW(s.validate());
  for (const char* bad : {"", "1KEY", "MY-KEY", "A B"}) {
    s.env_var = bad;
    try {
      s.validate();
      ADD_FAILURE() << "accepted env_var '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("MasterKeySource.env_var"), std::string::npos);
    }
  }
  s = MasterKeySource{};
  s.kind = MasterKeySource::Kind::kFile;
  try {
    s.validate();
    ADD_FAILURE() << "accepted an empty key_file";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("MasterKeySource.key_file"), std::string::npos);
  }
  s = MasterKeySource{};
  s.key_file = "/tmp/k";  // a file given while kind is none: a mistake, not silently ignored
  EXPECT_THROW(s.validate(), InvalidArgument);
  s.kind = static_cast<MasterKeySource::Kind>(9);
  EXPECT_THROW(s.validate(), InvalidArgument);
}

TEST(StoreCrypto, MasterKeyFromTheEnvironment) {
  MasterKeySource s;
  s.kind = MasterKeySource::Kind::kEnvironment;
  s.env_var = "SVATTN_TEST_CRYPTO_MASTER";
  const SecretKey want = SecretKey::random();
  SecretKey got;
  ::unsetenv(s.env_var.c_str());
  EXPECT_THROW(load_master_key(s, got), MasterKeyError);
  ::setenv(s.env_var.c_str(), "", 1);
  EXPECT_THROW(load_master_key(s, got), MasterKeyError);
  ::setenv(s.env_var.c_str(), hex_of(want).substr(1).c_str(), 1);  // 63 digits
  EXPECT_THROW(load_master_key(s, got), MasterKeyError);
  ::setenv(s.env_var.c_str(), ("zz" + hex_of(want).substr(2)).c_str(), 1);
  EXPECT_THROW(load_master_key(s, got), MasterKeyError);
  ::setenv(s.env_var.c_str(), (" " + hex_of(want) + "\n").c_str(), 1);
  ASSERT_TRUE(load_master_key(s, got));
  EXPECT_TRUE(same_key(got, want));
  ::unsetenv(s.env_var.c_str());
  MasterKeySource none;
  SecretKey untouched;
  EXPECT_FALSE(load_master_key(none, untouched));
  EXPECT_TRUE(all_zero(untouched));
}

TEST(StoreCrypto, MasterKeyFromAnOwnerOnlyKeyFile) {
  TempDir dir;
  MasterKeySource s;
  s.kind = MasterKeySource::Kind::kFile;
  s.key_file = dir.file("master.key");
  SecretKey got;
  EXPECT_THROW(load_master_key(s, got), MasterKeyError);  // missing
  const SecretKey want = SecretKey::random();
  const std::string text = hex_of(want) + "\n";
  store_test::write_bytes(s.key_file, std::vector<std::uint8_t>(text.begin(), text.end()));
  ::chmod(s.key_file.c_str(), 0644);
  try {
    load_master_key(s, got);
    ADD_FAILURE() << "a group/world-readable key file was accepted";
  } catch (const MasterKeyError& e) {
    EXPECT_NE(std::string(e.what()).find("0644"), std::string::npos) << e.what();
  }
  ::chmod(s.key_file.c_str(), 0600);
  ASSERT_TRUE(load_master_key(s, got));
  EXPECT_TRUE(same_key(got, want));
  store_test::write_bytes(s.key_file, {'a', 'b'});
  EXPECT_THROW(load_master_key(s, got), MasterKeyError);
  s.key_file = dir.path();  // a directory
  EXPECT_THROW(load_master_key(s, got), MasterKeyError);
}

TEST(StoreCrypto, MasterKeyCheckAndIdsAreDistinct) {
  const SecretKey a = SecretKey::random();
  EXPECT_EQ(master_key_check(a), master_key_check(a.clone()));
  EXPECT_NE(master_key_check(a), master_key_check(SecretKey::random()));
  EXPECT_EQ(master_key_check(a).size(), 64u);
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(random_id_hex());
  EXPECT_EQ(ids.size(), 1000u);
  EXPECT_EQ(random_id_hex().size(), 32u);
}

}  // namespace
}  // namespace svattn::store_detail
