// Encryption at rest for store records (docs/store.md "Encryption at rest (building blocks)"):
// AES-256-GCM seal/open of one record field under its own data key with typed associated data,
// wrapping of data keys under an optional master key, and loading that master key from an
// environment variable or a key file. Private to the store; key material is zeroed on release.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "svattn/errors.h"
#include "svattn/store_errors.h"

struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX

namespace svattn::store_detail {

constexpr std::size_t kKeyBytes = 32;    ///< AES-256 key (data key and master key)
constexpr std::size_t kNonceBytes = 12;  ///< GCM 96-bit nonce
constexpr std::size_t kTagBytes = 16;    ///< GCM 128-bit tag
constexpr std::uint8_t kSealVersion = 1;
/// Bytes a sealed blob adds to its plaintext: version (1) + nonce (12) + tag (16).
constexpr std::size_t kSealOverhead = 1 + kNonceBytes + kTagBytes;
/// A token message (schema 7; docs/store.md "Token messages"): a token's key and value sealed as
/// one GCM message split over the two columns. The key column holds kTokenSealVersion | nonce |
/// the key's ciphertext, the value column the value's ciphertext | tag.
constexpr std::uint8_t kTokenSealVersion = 2;
constexpr std::size_t kTokenKeyOverhead = 1 + kNonceBytes;  ///< bytes before the key's ciphertext
constexpr std::size_t kTokenValueOverhead = kTagBytes;      ///< bytes after the value's ciphertext
/// Size of a wrapped data key: version (1) + nonce (12) + encrypted key (32) + tag (16).
constexpr std::size_t kWrappedKeyBytes = 1 + kNonceBytes + kKeyBytes + kTagBytes;

/// 256 bits of secret key material, zeroed (OPENSSL_cleanse) when destroyed or moved from.
/// Move-only so that no stray copy outlives its owner; clone() makes a copy explicit.
class SecretKey {
 public:
  SecretKey() = default;
  ~SecretKey();
  SecretKey(SecretKey&& o) noexcept;
  SecretKey& operator=(SecretKey&& o) noexcept;
  SecretKey(const SecretKey&) = delete;
  SecretKey& operator=(const SecretKey&) = delete;

  /// A fresh key from OpenSSL's CSPRNG (RAND_bytes); StoreError if the generator fails.
  static SecretKey random();
  /// A key from exactly kKeyBytes bytes (InvalidArgument otherwise).
  static SecretKey from_bytes(const std::uint8_t* data, std::size_t n);
  SecretKey clone() const;
  const std::uint8_t* data() const { return bytes_.data(); }
  /// Zeroes the key now.
  void clear() noexcept;

 private:
  std::array<std::uint8_t, kKeyBytes> bytes_{};
};

/// Which column of a token a sealed blob holds; part of the associated data so that a token's key
/// and value ciphertexts cannot be swapped.
/// kBuckets: the record's persisted bucket digests (position -1; docs/store.md "Forget without a
/// restore"). kBounds: a record's screening bounds (schema 5, read only). kBoundsGroup: the
/// screening bounds of a bounds group (schema 6; record_id holds the group id, position -1;
/// docs/store.md "Bounds groups"). kKey / kValue: a token's key or value as its own message (up
/// to schema 6); kToken: a token's key and value as one token message (schema 7).
enum class RecordField : std::uint8_t {
  kKey = 1,
  kValue = 2,
  kBuckets = 3,
  kBounds = 4,
  kBoundsGroup = 5,
  kToken = 6
};
const char* to_string(RecordField f);

/// The associated data of one sealed blob: the place it belongs to. A blob moved to any other
/// (memory, record, position, field) fails authentication.
struct RecordAad {
  std::int64_t memory_id = 0;
  std::int64_t record_id = 0;
  std::int64_t position = 0;
  RecordField field = RecordField::kKey;
  static constexpr std::size_t kEncodedBytes = 41;
  /// Fixed 41-byte encoding: "svattn-record-v1" (16) | memory | record | position (int64 LE) |
  /// field (1). Fixed width, so no two places share an encoding.
  std::array<std::uint8_t, kEncodedBytes> encode() const;
  /// "memory 3, record 7, position 2, key", or "memory 3, bounds group 4" (error messages).
  std::string describe() const;
};

/// A sealed blob failed authentication: its ciphertext, tag, nonce or associated data was altered,
/// it was moved from another record, or the data key is not the record's. Names the record.
class RecordTampered : public FormatError {
 public:
  RecordTampered(const RecordAad& aad, const std::string& detail);
  const RecordAad& aad() const { return aad_; }

 private:
  RecordAad aad_;
};

/// The master key is missing, malformed, unreadable, or not the key the key store was made with
/// (svattn::MasterKeyError, public in svattn/store_errors.h): an InvalidArgument, the CLI exits 2.
using svattn::MasterKeyError;

/// Seals many fields under one data key (a record's keys and values): the AES key schedule is set
/// up once. Nonces (docs/store.md "Encryption at rest (building blocks)", Nonces): a random 96-bit
/// base drawn from RAND_bytes when the sealer is made, plus the number of blobs sealed before
/// (added to its last 8 bytes, mod 2^64), so nonces never repeat within a sealer and are
/// independent random values across sealers.
class Sealer {
 public:
  explicit Sealer(const SecretKey& key);
  ~Sealer();
  Sealer(const Sealer&) = delete;
  Sealer& operator=(const Sealer&) = delete;
  /// Seals `n` plaintext bytes into `out` (resized to n + kSealOverhead): kSealVersion | nonce |
  /// ciphertext (n) | tag.
  void seal_into(const RecordAad& aad, const void* plain, std::size_t n,
                 std::vector<std::uint8_t>& out);
  /// Seals under `key` from now on (one record after another: no new cipher context, no new
  /// random draw). The nonce base and count carry on, so the sealer's nonces still never repeat,
  /// under whichever key, and each key's nonces start at an independent random point.
  void rekey(const SecretKey& key);
  /// Seals a token's key (`kn` bytes) and value (`vn` bytes) as one token message (aad.field is
  /// RecordField::kToken): `key_out` = kTokenSealVersion | nonce | key ciphertext (kn +
  /// kTokenKeyOverhead bytes), `value_out` = value ciphertext | tag (vn + kTokenValueOverhead).
  void seal_token(const RecordAad& aad, const void* key, std::size_t kn, const void* value,
                  std::size_t vn, std::vector<std::uint8_t>& key_out,
                  std::vector<std::uint8_t>& value_out);

 private:
  void next_nonce(std::uint8_t* nonce);  // base + count (mod 2^64 in its last 8 bytes)
  evp_cipher_ctx_st* ctx_ = nullptr;
  std::array<std::uint8_t, kNonceBytes> base_{};
  std::uint64_t count_ = 0;
};

/// Opens many blobs under one data key (the key schedule is set up once).
class Opener {
 public:
  explicit Opener(const SecretKey& key);
  ~Opener();
  Opener(const Opener&) = delete;
  Opener& operator=(const Opener&) = delete;
  /// Opens a sealed blob into `out` (exactly opened_size bytes). Throws RecordTampered (naming the
  /// record) if authentication fails; `out` is then zeroed, never left with unauthenticated bytes.
  void open_into(const RecordAad& aad, const void* sealed, std::size_t sealed_bytes, void* out,
                 std::size_t out_bytes);
  /// Opens a sealed blob whose parts were split apart: `header` is its first 1 + kNonceBytes bytes
  /// (version, nonce), `tag` its last kTagBytes, and `buf` holds its `n` ciphertext bytes, which
  /// are decrypted in place. The same errors as open_into; on failure `buf` is zeroed.
  void open_in_place(const RecordAad& aad, const std::uint8_t* header, const std::uint8_t* tag,
                     void* buf, std::size_t n);
  /// Opens a token message (Sealer::seal_token) whose parts were split apart: `header` is the key
  /// column's first kTokenKeyOverhead bytes, `tag` the value column's last kTagBytes; `key_buf`
  /// (`kn` bytes) and `value_buf` (`vn`) hold the ciphertexts and are decrypted in place. The same
  /// errors as open_into; on failure both buffers are zeroed.
  void open_token_in_place(const RecordAad& aad, const std::uint8_t* header,
                           const std::uint8_t* tag, void* key_buf, std::size_t kn, void* value_buf,
                           std::size_t vn);
  /// One piece of a message's ciphertext and where its plaintext goes (in == out allowed).
  struct Piece {
    const std::uint8_t* in;
    std::uint8_t* out;
    std::size_t n;
  };
  /// Opens a token message from its key ciphertext `key` and value ciphertext `value`, wherever
  /// they are (in place, or straight from the two columns into their destinations); `header` and
  /// `tag` as for open_token_in_place. The same errors; on failure both outputs are zeroed.
  void open_token(const RecordAad& aad, const std::uint8_t* header, const std::uint8_t* tag,
                  Piece key, Piece value);

 private:
  void open_parts(const RecordAad& aad, std::uint8_t version, const std::uint8_t* header,
                  const std::uint8_t* tag, Piece first, Piece second);
  evp_cipher_ctx_st* ctx_ = nullptr;
};

/// One-blob forms of Sealer / Opener (a fresh random nonce per call, so sealing the same bytes
/// twice gives different blobs).
std::vector<std::uint8_t> seal(const SecretKey& key, const RecordAad& aad, const void* plain,
                               std::size_t n);
/// Same, into `out` (resized to n + kSealOverhead; reuses its capacity).
void seal_into(const SecretKey& key, const RecordAad& aad, const void* plain, std::size_t n,
               std::vector<std::uint8_t>& out);

/// Plaintext size of a sealed blob of `sealed_bytes` bytes (RecordTampered if too short).
std::size_t opened_size(const RecordAad& aad, std::size_t sealed_bytes);
void open_into(const SecretKey& key, const RecordAad& aad, const void* sealed,
               std::size_t sealed_bytes, void* out, std::size_t out_bytes);
std::vector<std::uint8_t> open(const SecretKey& key, const RecordAad& aad, const void* sealed,
                               std::size_t sealed_bytes);

/// Wraps a data key under the master key with AES-256-GCM (docs/store.md "Encryption at rest", Key
/// wrapping); the associated data binds the key id, so wrapped keys cannot be swapped between
/// key-store rows. Result: kWrappedKeyBytes bytes.
std::vector<std::uint8_t> wrap_key(const SecretKey& master, const std::string& key_id,
                                   const SecretKey& data_key);
/// Unwraps; MasterKeyError if authentication fails (wrong master key or altered wrapped key).
SecretKey unwrap_key(const SecretKey& master, const std::string& key_id,
                     const std::vector<std::uint8_t>& wrapped);

/// Where the master key comes from. Never a command-line value: a command line is visible to
/// every local user (ps, /proc/PID/cmdline) and kept in shell histories.
struct MasterKeySource {
  enum class Kind { kNone, kEnvironment, kFile };
  /// kNone (default): data keys are stored unwrapped in the key store.
  Kind kind = Kind::kNone;
  /// kEnvironment: the variable holding the key as 64 hexadecimal characters.
  std::string env_var = "SVATTN_MASTER_KEY";
  /// kFile: a file holding the key as 64 hexadecimal characters (surrounding white space
  /// ignored), readable by its owner only (mode 0600 or 0400).
  std::string key_file;
  /// InvalidArgument naming the field: env_var must be a valid variable name for kEnvironment,
  /// key_file non-empty for kFile, key_file empty otherwise.
  void validate() const;
  std::string describe() const;
};

/// Loads the master key (validate() first). MasterKeyError if the variable is unset or empty, the
/// file is missing, unreadable or readable by group/others, or the text is not 64 hex digits.
/// Returns false (and leaves `key` untouched) for Kind::kNone.
bool load_master_key(const MasterKeySource& source, SecretKey& key);

/// A domain-separated fingerprint of the master key, SHA-256("svattn-master-check-v1" | key), hex.
/// Stored in the key store to tell a wrong master key from a tampered wrapped key.
std::string master_key_check(const SecretKey& master);

/// 16 random bytes as 32 lowercase hex digits (key ids).
std::string random_id_hex();

}  // namespace svattn::store_detail
