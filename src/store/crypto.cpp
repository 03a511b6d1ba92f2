// AES-256-GCM sealing of record fields, data-key wrapping and master-key loading (docs/store.md
// "Encryption at rest (building blocks)"), on OpenSSL 3 EVP.
#include "crypto.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "svattn/hash.h"
#include "svattn/store_errors.h"

namespace svattn::store_detail {
namespace {

constexpr char kRecordLabel[] = "svattn-record-v1";  // 16 bytes, no terminator in the encoding
constexpr char kWrapLabel[] = "svattn-keywrap-v1";
constexpr char kCheckLabel[] = "svattn-master-check-v1";

// The AES-256-GCM implementation, fetched once: an implicit fetch per call costs more than
// sealing a 512-byte field.
const EVP_CIPHER* gcm_cipher() {
  static EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  if (cipher == nullptr) throw StoreError("OpenSSL: AES-256-GCM is not available");
  return cipher;
}

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }  // cleanses the schedule
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

Ctx new_ctx() {
  Ctx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) throw StoreError("OpenSSL: cannot allocate a cipher context");
  return ctx;
}

void random_bytes(std::uint8_t* out, std::size_t n) {
  if (RAND_bytes(out, static_cast<int>(n)) != 1) {
    throw StoreError("OpenSSL: the random generator failed (RAND_bytes)");
  }
}

void put_le64(std::uint8_t* out, std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(u >> (8 * i));
}

// Feeds `n` bytes through EVP_{En,De}cryptUpdate in int-sized pieces.
template <typename Update>
bool update_all(EVP_CIPHER_CTX* ctx, Update update, std::uint8_t* out, const std::uint8_t* in,
                std::size_t n) {
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  std::size_t done = 0;
  while (done < n) {
    const int piece = static_cast<int>(std::min(kChunk, n - done));
    int len = 0;
    if (update(ctx, out == nullptr ? nullptr : out + done, &len, in + done, piece) != 1) {
      return false;
    }
    SVATTN_ASSERT(len == piece, "AES-GCM is a stream mode: one output byte per input byte");
    done += static_cast<std::size_t>(piece);
  }
  return true;
}

// One AES-256-GCM encryption: out = ciphertext (n bytes), tag (16 bytes).
void gcm_encrypt(const std::uint8_t* key, const std::uint8_t* nonce, const std::uint8_t* aad,
                 std::size_t aad_n, const std::uint8_t* in, std::size_t n, std::uint8_t* out,
                 std::uint8_t* tag) {
  Ctx ctx = new_ctx();
  int len = 0;
  bool ok =
      EVP_EncryptInit_ex2(ctx.get(), gcm_cipher(), key, nonce, nullptr) == 1 &&
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, aad, static_cast<int>(aad_n)) == 1 &&
      update_all(ctx.get(), EVP_EncryptUpdate, out, in, n) &&
      EVP_EncryptFinal_ex(ctx.get(), out + n, &len) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), tag) == 1;
  if (!ok) throw StoreError("OpenSSL: AES-256-GCM encryption failed");
}

// One AES-256-GCM decryption; false if the tag does not authenticate (aad, nonce, ciphertext).
bool gcm_decrypt(const std::uint8_t* key, const std::uint8_t* nonce, const std::uint8_t* aad,
                 std::size_t aad_n, const std::uint8_t* in, std::size_t n, const std::uint8_t* tag,
                 std::uint8_t* out) {
  Ctx ctx = new_ctx();
  int len = 0;
  std::uint8_t tag_copy[kTagBytes];
  std::memcpy(tag_copy, tag, kTagBytes);
  if (EVP_DecryptInit_ex2(ctx.get(), gcm_cipher(), key, nonce, nullptr) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, aad, static_cast<int>(aad_n)) != 1 ||
      !update_all(ctx.get(), EVP_DecryptUpdate, out, in, n) ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), tag_copy) !=
          1) {
    throw StoreError("OpenSSL: AES-256-GCM decryption failed to start");
  }
  return EVP_DecryptFinal_ex(ctx.get(), out + n, &len) == 1;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses exactly 64 hex digits (surrounding white space ignored) into `key`; false otherwise.
bool parse_hex_key(const char* text, std::size_t n, SecretKey& key) {
  std::size_t b = 0;
  std::size_t e = n;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (b < e && space(text[b])) ++b;
  while (e > b && space(text[e - 1])) --e;
  if (e - b != 2 * kKeyBytes) return false;
  std::array<std::uint8_t, kKeyBytes> raw{};
  bool ok = true;
  for (std::size_t i = 0; i < kKeyBytes && ok; ++i) {
    const int hi = hex_digit(text[b + 2 * i]);
    const int lo = hex_digit(text[b + 2 * i + 1]);
    ok = hi >= 0 && lo >= 0;
    raw[i] = static_cast<std::uint8_t>(ok ? hi * 16 + lo : 0);
  }
  if (ok) key = SecretKey::from_bytes(raw.data(), raw.size());
  OPENSSL_cleanse(raw.data(), raw.size());
  return ok;
}

bool load_from_env(const MasterKeySource& s, SecretKey& key) {
  const char* v = std::getenv(s.env_var.c_str());
  if (v == nullptr || *v == '\0') {
    throw MasterKeyError("master key: environment variable " + s.env_var +
                         " is not set or empty (expected 64 hexadecimal characters)");
  }
  if (!parse_hex_key(v, std::strlen(v), key)) {
    throw MasterKeyError("master key: environment variable " + s.env_var +
                         " does not hold exactly 64 hexadecimal characters");
  }
  return true;
}

bool load_from_file(const MasterKeySource& s, SecretKey& key) {
  const std::string& f = s.key_file;
  const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw MasterKeyError("master key: cannot open key file '" + f + "': " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw MasterKeyError("master key: key file '" + f + "' is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw MasterKeyError("master key: key file '" + f + "' has mode " + mode +
                         "; it must be readable by its owner only (chmod 600)");
  }
  std::array<char, 256> buf{};
  const ssize_t got = ::read(fd, buf.data(), buf.size());
  ::close(fd);
  const bool ok = got > 0 && parse_hex_key(buf.data(), static_cast<std::size_t>(got), key);
  OPENSSL_cleanse(buf.data(), buf.size());
  if (!ok) {
    throw MasterKeyError("master key: key file '" + f +
                         "' does not hold exactly 64 hexadecimal characters");
  }
  return true;
}

}  // namespace

// ------------------------------------------------------------------------------------ SecretKey

SecretKey::~SecretKey() { clear(); }
SecretKey::SecretKey(SecretKey&& o) noexcept : bytes_(o.bytes_) { o.clear(); }
SecretKey& SecretKey::operator=(SecretKey&& o) noexcept {
  if (this != &o) {
    bytes_ = o.bytes_;
    o.clear();
  }
  return *this;
}
void SecretKey::clear() noexcept { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

SecretKey SecretKey::random() {
  SecretKey k;
  random_bytes(k.bytes_.data(), k.bytes_.size());
  return k;
}

SecretKey SecretKey::from_bytes(const std::uint8_t* data, std::size_t n) {
  if (n != kKeyBytes) {
    throw InvalidArgument("secret key: expected " + std::to_string(kKeyBytes) + " bytes, got " +
                          std::to_string(n));
  }
  SecretKey k;
  std::memcpy(k.bytes_.data(), data, n);
  return k;
}

SecretKey SecretKey::clone() const { return from_bytes(bytes_.data(), bytes_.size()); }

// ---------------------------------------------------------------------------------- RecordAad

const char* to_string(RecordField f) {
  switch (f) {
    case RecordField::kKey: return "key";
    case RecordField::kValue: return "value";
    case RecordField::kBuckets: return "bucket digests";
    case RecordField::kBounds: return "screening bounds";
    case RecordField::kBoundsGroup: return "bounds group";
    case RecordField::kToken: return "token";
  }
  return "?";
}

std::array<std::uint8_t, RecordAad::kEncodedBytes> RecordAad::encode() const {
  static_assert(sizeof kRecordLabel - 1 + 3 * 8 + 1 == kEncodedBytes, "AAD layout");
  std::array<std::uint8_t, kEncodedBytes> out{};
  std::memcpy(out.data(), kRecordLabel, sizeof kRecordLabel - 1);
  std::size_t at = sizeof kRecordLabel - 1;
  for (const std::int64_t v : {memory_id, record_id, position}) {
    put_le64(out.data() + at, v);
    at += 8;
  }
  out[at] = static_cast<std::uint8_t>(field);
  return out;
}

std::string RecordAad::describe() const {
  if (field == RecordField::kBoundsGroup)
    return "memory " + std::to_string(memory_id) + ", bounds group " + std::to_string(record_id);
  return "memory " + std::to_string(memory_id) + ", record " + std::to_string(record_id) +
         ", position " + std::to_string(position) + ", " + to_string(field);
}

RecordTampered::RecordTampered(const RecordAad& aad, const std::string& detail)
    : FormatError("encrypted record (" + aad.describe() + ") " + detail), aad_(aad) {}

// --------------------------------------------------------------------------------- seal / open

Sealer::Sealer(const SecretKey& key) : ctx_(EVP_CIPHER_CTX_new()) {
  if (ctx_ == nullptr) throw StoreError("OpenSSL: cannot allocate a cipher context");
  if (EVP_EncryptInit_ex2(ctx_, gcm_cipher(), key.data(), nullptr, nullptr) != 1) {
    EVP_CIPHER_CTX_free(ctx_);
    throw StoreError("OpenSSL: AES-256-GCM key setup failed");
  }
  random_bytes(base_.data(), base_.size());
}

void Sealer::rekey(const SecretKey& key) {
  if (EVP_EncryptInit_ex2(ctx_, nullptr, key.data(), nullptr, nullptr) != 1)
    throw StoreError("OpenSSL: AES-256-GCM key setup failed");
}

Sealer::~Sealer() {
  EVP_CIPHER_CTX_free(ctx_);  // cleanses the key schedule
  OPENSSL_cleanse(base_.data(), base_.size());
}

void Sealer::next_nonce(std::uint8_t* nonce) {
  std::memcpy(nonce, base_.data(), kNonceBytes);
  std::uint64_t low = 0;
  for (int i = 0; i < 8; ++i) low |= std::uint64_t{nonce[4 + i]} << (8 * i);
  low += count_++;
  for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<std::uint8_t>(low >> (8 * i));
}

void Sealer::seal_into(const RecordAad& aad, const void* plain, std::size_t n,
                       std::vector<std::uint8_t>& out) {
  out.resize(n + kSealOverhead);
  out[0] = kSealVersion;
  std::uint8_t* nonce = out.data() + 1;
  next_nonce(nonce);
  const auto a = aad.encode();
  std::uint8_t* ct = out.data() + 1 + kNonceBytes;
  int len = 0;
  const bool ok =
      EVP_EncryptInit_ex2(ctx_, nullptr, nullptr, nonce, nullptr) == 1 &&
      EVP_EncryptUpdate(ctx_, nullptr, &len, a.data(), static_cast<int>(a.size())) == 1 &&
      update_all(ctx_, EVP_EncryptUpdate, ct, static_cast<const std::uint8_t*>(plain), n) &&
      EVP_EncryptFinal_ex(ctx_, ct + n, &len) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), ct + n) == 1;
  if (!ok) throw StoreError("OpenSSL: AES-256-GCM encryption failed");
}

void Sealer::seal_token(const RecordAad& aad, const void* key, std::size_t kn, const void* value,
                        std::size_t vn, std::vector<std::uint8_t>& key_out,
                        std::vector<std::uint8_t>& value_out) {
  SVATTN_ASSERT(aad.field == RecordField::kToken, "a token message's associated data is kToken");
  key_out.resize(kn + kTokenKeyOverhead);
  value_out.resize(vn + kTokenValueOverhead);
  key_out[0] = kTokenSealVersion;
  std::uint8_t* nonce = key_out.data() + 1;
  next_nonce(nonce);
  const auto a = aad.encode();
  std::uint8_t* tag = value_out.data() + vn;
  int len = 0;
  const bool ok =
      EVP_EncryptInit_ex2(ctx_, nullptr, nullptr, nonce, nullptr) == 1 &&
      EVP_EncryptUpdate(ctx_, nullptr, &len, a.data(), static_cast<int>(a.size())) == 1 &&
      update_all(ctx_, EVP_EncryptUpdate, key_out.data() + kTokenKeyOverhead,
                 static_cast<const std::uint8_t*>(key), kn) &&
      update_all(ctx_, EVP_EncryptUpdate, value_out.data(), static_cast<const std::uint8_t*>(value),
                 vn) &&
      EVP_EncryptFinal_ex(ctx_, tag, &len) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), tag) == 1;
  if (!ok) throw StoreError("OpenSSL: AES-256-GCM encryption failed");
}

Opener::Opener(const SecretKey& key) : ctx_(EVP_CIPHER_CTX_new()) {
  if (ctx_ == nullptr) throw StoreError("OpenSSL: cannot allocate a cipher context");
  if (EVP_DecryptInit_ex2(ctx_, gcm_cipher(), key.data(), nullptr, nullptr) != 1) {
    EVP_CIPHER_CTX_free(ctx_);
    throw StoreError("OpenSSL: AES-256-GCM key setup failed");
  }
}

Opener::~Opener() { EVP_CIPHER_CTX_free(ctx_); }

void Opener::open_into(const RecordAad& aad, const void* sealed, std::size_t sealed_bytes,
                       void* out, std::size_t out_bytes) {
  const std::size_t n = opened_size(aad, sealed_bytes);
  if (out_bytes != n) {
    throw InvalidArgument("open_into: output has " + std::to_string(out_bytes) +
                          " bytes, the sealed blob holds " + std::to_string(n));
  }
  const auto* s = static_cast<const std::uint8_t*>(sealed);
  open_parts(aad, kSealVersion, s, s + 1 + kNonceBytes + n,
             {s + 1 + kNonceBytes, static_cast<std::uint8_t*>(out), n}, {nullptr, nullptr, 0});
}

void Opener::open_in_place(const RecordAad& aad, const std::uint8_t* header,
                           const std::uint8_t* tag, void* buf, std::size_t n) {
  auto* b = static_cast<std::uint8_t*>(buf);
  // GCM is a stream mode: in == out is allowed.
  open_parts(aad, kSealVersion, header, tag, {b, b, n}, {nullptr, nullptr, 0});
}

void Opener::open_token_in_place(const RecordAad& aad, const std::uint8_t* header,
                                 const std::uint8_t* tag, void* key_buf, std::size_t kn,
                                 void* value_buf, std::size_t vn) {
  auto* k = static_cast<std::uint8_t*>(key_buf);
  auto* v = static_cast<std::uint8_t*>(value_buf);
  open_parts(aad, kTokenSealVersion, header, tag, {k, k, kn}, {v, v, vn});
}

void Opener::open_token(const RecordAad& aad, const std::uint8_t* header, const std::uint8_t* tag,
                        Piece key, Piece value) {
  open_parts(aad, kTokenSealVersion, header, tag, key, value);
}

void Opener::open_parts(const RecordAad& aad, std::uint8_t version, const std::uint8_t* header,
                        const std::uint8_t* tag, Piece first, Piece second) {
  const auto wipe = [&] {
    OPENSSL_cleanse(first.out, first.n);
    if (second.n > 0) OPENSSL_cleanse(second.out, second.n);
  };
  if (header[0] != version) {
    wipe();
    throw RecordTampered(aad, "has seal version " + std::to_string(header[0]) + ", expected " +
                                  std::to_string(version));
  }
  const auto a = aad.encode();
  std::uint8_t expected[kTagBytes];
  std::memcpy(expected, tag, kTagBytes);
  // The expected tag goes in with the nonce (one provider call instead of a ctrl after the data:
  // a restore opens one message per token, and OpenSSL's per-call overhead dominates them).
  const OSSL_PARAM with_tag[] = {
      OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, expected, kTagBytes),
      OSSL_PARAM_construct_end()};
  int len = 0;
  if (EVP_DecryptInit_ex2(ctx_, nullptr, nullptr, header + 1, with_tag) != 1 ||
      EVP_DecryptUpdate(ctx_, nullptr, &len, a.data(), static_cast<int>(a.size())) != 1 ||
      !update_all(ctx_, EVP_DecryptUpdate, first.out, first.in, first.n) ||
      !update_all(ctx_, EVP_DecryptUpdate, second.out, second.in, second.n)) {
    wipe();
    throw StoreError("OpenSSL: AES-256-GCM decryption failed to start");
  }
  std::uint8_t none[1];
  if (EVP_DecryptFinal_ex(ctx_, none, &len) != 1) {
    wipe();
    throw RecordTampered(aad,
                         "failed authentication: its ciphertext, tag, nonce or associated data "
                         "was altered, it was moved from another record, or the data key is not "
                         "the record's");
  }
}

void seal_into(const SecretKey& key, const RecordAad& aad, const void* plain, std::size_t n,
               std::vector<std::uint8_t>& out) {
  Sealer(key).seal_into(aad, plain, n, out);
}

std::vector<std::uint8_t> seal(const SecretKey& key, const RecordAad& aad, const void* plain,
                               std::size_t n) {
  std::vector<std::uint8_t> out;
  seal_into(key, aad, plain, n, out);
  return out;
}

std::size_t opened_size(const RecordAad& aad, std::size_t sealed_bytes) {
  if (sealed_bytes < kSealOverhead) {
    throw RecordTampered(aad, "is truncated (" + std::to_string(sealed_bytes) +
                                  " bytes, a sealed blob has at least " +
                                  std::to_string(kSealOverhead) + ")");
  }
  return sealed_bytes - kSealOverhead;
}

void open_into(const SecretKey& key, const RecordAad& aad, const void* sealed,
               std::size_t sealed_bytes, void* out, std::size_t out_bytes) {
  Opener(key).open_into(aad, sealed, sealed_bytes, out, out_bytes);
}

std::vector<std::uint8_t> open(const SecretKey& key, const RecordAad& aad, const void* sealed,
                               std::size_t sealed_bytes) {
  std::vector<std::uint8_t> out(opened_size(aad, sealed_bytes));
  open_into(key, aad, sealed, sealed_bytes, out.data(), out.size());
  return out;
}

// ------------------------------------------------------------------------------- key wrapping

namespace {
std::vector<std::uint8_t> wrap_aad(const std::string& key_id) {
  std::vector<std::uint8_t> a(kWrapLabel, kWrapLabel + sizeof kWrapLabel - 1);
  a.push_back(static_cast<std::uint8_t>(key_id.size()));
  a.insert(a.end(), key_id.begin(), key_id.end());
  return a;
}
}  // namespace

std::vector<std::uint8_t> wrap_key(const SecretKey& master, const std::string& key_id,
                                   const SecretKey& data_key) {
  if (key_id.empty() || key_id.size() > 255) {
    throw InvalidArgument("wrap_key: key_id must have 1..255 bytes, got " +
                          std::to_string(key_id.size()));
  }
  std::vector<std::uint8_t> out(kWrappedKeyBytes);
  out[0] = kSealVersion;
  random_bytes(out.data() + 1, kNonceBytes);
  const std::vector<std::uint8_t> a = wrap_aad(key_id);
  gcm_encrypt(master.data(), out.data() + 1, a.data(), a.size(), data_key.data(), kKeyBytes,
              out.data() + 1 + kNonceBytes, out.data() + 1 + kNonceBytes + kKeyBytes);
  return out;
}

SecretKey unwrap_key(const SecretKey& master, const std::string& key_id,
                     const std::vector<std::uint8_t>& wrapped) {
  if (wrapped.size() != kWrappedKeyBytes || wrapped[0] != kSealVersion) {
    throw MasterKeyError("wrapped data key '" + key_id + "' has " + std::to_string(wrapped.size()) +
                         " bytes or an unknown version (expected " +
                         std::to_string(kWrappedKeyBytes) + ", version 1)");
  }
  if (key_id.empty() || key_id.size() > 255) {
    throw InvalidArgument("unwrap_key: key_id must have 1..255 bytes");
  }
  const std::vector<std::uint8_t> a = wrap_aad(key_id);
  std::array<std::uint8_t, kKeyBytes> raw{};
  const bool ok = gcm_decrypt(master.data(), wrapped.data() + 1, a.data(), a.size(),
                              wrapped.data() + 1 + kNonceBytes, kKeyBytes,
                              wrapped.data() + 1 + kNonceBytes + kKeyBytes, raw.data());
  if (!ok) {
    OPENSSL_cleanse(raw.data(), raw.size());
    throw MasterKeyError("wrapped data key '" + key_id +
                         "' does not unwrap under the master key (wrong master key, or the "
                         "wrapped key was altered or moved)");
  }
  SecretKey k = SecretKey::from_bytes(raw.data(), raw.size());
  OPENSSL_cleanse(raw.data(), raw.size());
  return k;
}

// ------------------------------------------------------------------------------ master key

void MasterKeySource::validate() const {
  switch (kind) {
    case Kind::kNone:
      if (!key_file.empty()) {
        throw InvalidArgument("MasterKeySource.key_file: '" + key_file +
                              "' is set but kind is none");
      }
      return;
    case Kind::kEnvironment: {
      bool ok = !env_var.empty() && !(env_var[0] >= '0' && env_var[0] <= '9');
      for (char c : env_var) {
        ok = ok && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_');
      }
      if (!ok) {
        throw InvalidArgument("MasterKeySource.env_var: '" + env_var +
                              "' is not a valid environment variable name");
      }
      if (!key_file.empty()) {
        throw InvalidArgument("MasterKeySource.key_file: '" + key_file +
                              "' is set but kind is environment");
      }
      return;
    }
    case Kind::kFile:
      if (key_file.empty()) throw InvalidArgument("MasterKeySource.key_file: empty for kind file");
      return;
  }
  throw InvalidArgument("MasterKeySource.kind: unknown value " +
                        std::to_string(static_cast<int>(kind)));
}

std::string MasterKeySource::describe() const {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kEnvironment:
      return "environment variable " + env_var;
    case Kind::kFile:
      return "key file '" + key_file + "'";
  }
  return "unknown";
}

bool load_master_key(const MasterKeySource& source, SecretKey& key) {
  source.validate();
  switch (source.kind) {
    case MasterKeySource::Kind::kNone:
      return false;
    case MasterKeySource::Kind::kEnvironment:
      return load_from_env(source, key);
    case MasterKeySource::Kind::kFile:
      return load_from_file(source, key);
  }
  return false;
}

std::string master_key_check(const SecretKey& master) {
  std::vector<std::uint8_t> buf(kCheckLabel, kCheckLabel + sizeof kCheckLabel - 1);
  buf.insert(buf.end(), master.data(), master.data() + kKeyBytes);
  const std::string h = sha256_hex(buf);
  OPENSSL_cleanse(buf.data(), buf.size());
  return h;
}

std::string random_id_hex() {
  std::uint8_t b[16];
  random_bytes(b, sizeof b);
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (std::uint8_t x : b) {
    s.push_back(kHex[x >> 4]);
    s.push_back(kHex[x & 15]);
  }
  return s;
}

}  // namespace svattn::store_detail
