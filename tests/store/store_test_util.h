// Helpers shared by the store tests: temporary directories, deterministic keys, file bytes, byte
// pattern scans and raw SQLite access (to tamper with a store from outside).
#pragma once
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/random_matrix.h"
#include "svattn/hash.h"
#include "svattn/store.h"

namespace svattn::store_test {

namespace fs = std::filesystem;

/// A fresh directory under $TMPDIR (or /tmp), removed when the object dies.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/svattn_store_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Uniform keys in [-1, 1) from a fixed seed, with all 52 mantissa bits random (so every
/// coordinate's fp64 byte pattern is unique with overwhelming probability).
inline RowMatrix random_keys(int n, int d, std::uint64_t seed) {
  svattn::support::Rng gen(seed);
  return svattn::support::uniform_signed_matrix(n, d, gen);
}

inline MemorySettings rbf_settings(double C, double bandwidth = 1.0) {
  MemorySettings s;
  s.problem.kernel.type = KernelType::kRbf;
  s.problem.kernel.bandwidth = bandwidth;
  s.problem.C = C;
  return s;
}

inline std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::vector<std::uint8_t>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// Copies a store's data file and, when it has one, its key store (STORE.keys) to `to`.
inline void copy_store(const std::string& from, const std::string& to) {
  write_bytes(to, read_bytes(from));
  const std::vector<std::uint8_t> keys = read_bytes(from + ".keys");
  if (!keys.empty()) write_bytes(to + ".keys", keys);
}

inline std::string file_sha(const std::string& path) { return sha256_hex(read_bytes(path)); }

inline bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

inline std::size_t count_occurrences(const std::vector<std::uint8_t>& hay, const void* pat,
                                     std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(pat);
  std::size_t count = 0;
  auto it = hay.begin();
  const std::boyer_moore_horspool_searcher searcher(p, p + n);
  while (true) {
    it = std::search(it, hay.end(), searcher);
    if (it == hay.end()) break;
    ++count;
    ++it;
  }
  return count;
}

/// Byte patterns of a matrix: every fp64 coordinate (8 bytes) and every pair of consecutive fp32
/// coordinates of a row (8 bytes; a single 4-byte fp32 pattern would match random data too often).
struct Patterns {
  std::vector<std::array<std::uint8_t, 8>> fp64;
  std::vector<std::array<std::uint8_t, 8>> fp32_pairs;
};
inline Patterns patterns_of(const RowMatrix& m) {
  Patterns p;
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    for (Eigen::Index k = 0; k < m.cols(); ++k) {
      std::array<std::uint8_t, 8> a{};
      const double v = m(i, k);
      std::memcpy(a.data(), &v, 8);
      p.fp64.push_back(a);
      if (k + 1 < m.cols()) {
        const float f0 = static_cast<float>(m(i, k));
        const float f1 = static_cast<float>(m(i, k + 1));
        std::memcpy(a.data(), &f0, 4);
        std::memcpy(a.data() + 4, &f1, 4);
        p.fp32_pairs.push_back(a);
      }
    }
  }
  return p;
}

/// Number of patterns (fp64, fp32 pairs) found anywhere in the store's files.
struct ScanResult {
  std::size_t fp64_found = 0;
  std::size_t fp32_found = 0;
  std::size_t bytes_scanned = 0;
};
inline ScanResult scan_store_files(const std::string& db, const Patterns& p) {
  ScanResult r;
  for (const std::string& f : {db, db + "-wal", db + "-journal", db + "-shm"}) {
    const std::vector<std::uint8_t> bytes = read_bytes(f);
    r.bytes_scanned += bytes.size();
    if (bytes.empty()) continue;
    for (const auto& a : p.fp64) r.fp64_found += count_occurrences(bytes, a.data(), 8) > 0 ? 1 : 0;
    for (const auto& a : p.fp32_pairs) {
      r.fp32_found += count_occurrences(bytes, a.data(), 8) > 0 ? 1 : 0;
    }
  }
  return r;
}

/// Raw SQLite access for tampering (the store must be closed or idle).
class RawDb {
 public:
  explicit RawDb(const std::string& path, bool create = false) {
    const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      throw std::runtime_error("sqlite3_open_v2 failed");
    }
  }
  ~RawDb() { sqlite3_close_v2(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;
  /// Returns the SQLite result code (SQLITE_OK on success).
  int exec(const std::string& sql) {
    return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  }
  std::int64_t query_int(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr);
    std::int64_t v = -1;
    if (s != nullptr && sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
  }
  /// The first column of the first row as text ("" when there is none or it is NULL).
  std::string query_text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr);
    std::string v;
    if (s != nullptr && sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0) != nullptr)
      v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return v;
  }
  sqlite3* handle() { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

/// A bounds group's plaintext blob as docs/store.md "Bounds groups" defines it: EPOCH (i64) | M
/// (i64) | M x (RECORD, COUNT) (i64) | bounds (fp64) | SHA-256("svattn-group-bounds-v1\n" MEMORY
/// "\n" GROUP "\n" EPOCH "\n" M "\n" ENTRIES BOUNDS), little-endian. Written here from the
/// documentation, independently of the store's encoder.
struct PlainGroup {
  std::int64_t epoch = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> entries;  // (record, count)
  std::vector<double> bounds;
};
inline PlainGroup parse_group_blob(const std::vector<std::uint8_t>& b) {
  PlainGroup g;
  std::int64_t m = 0;
  std::memcpy(&g.epoch, b.data(), 8);
  std::memcpy(&m, b.data() + 8, 8);
  std::size_t at = 16, total = 0;
  for (std::int64_t k = 0; k < m; ++k, at += 16) {
    std::int64_t r = 0, c = 0;
    std::memcpy(&r, b.data() + at, 8);
    std::memcpy(&c, b.data() + at + 8, 8);
    g.entries.emplace_back(r, c);
    total += static_cast<std::size_t>(c);
  }
  g.bounds.resize(total);
  std::memcpy(g.bounds.data(), b.data() + at, total * 8);
  return g;
}
inline std::vector<std::uint8_t> documented_group_blob(std::int64_t memory_id, std::int64_t group,
                                                       const PlainGroup& g) {
  std::vector<std::uint8_t> body;
  const auto put = [&](const void* p, std::size_t n) {
    const auto* c = static_cast<const std::uint8_t*>(p);
    body.insert(body.end(), c, c + n);
  };
  for (const auto& [r, c] : g.entries) {
    put(&r, 8);
    put(&c, 8);
  }
  put(g.bounds.data(), g.bounds.size() * 8);
  const std::string head = "svattn-group-bounds-v1\n" + std::to_string(memory_id) + "\n" +
                           std::to_string(group) + "\n" + std::to_string(g.epoch) + "\n" +
                           std::to_string(g.entries.size()) + "\n";
  std::vector<std::uint8_t> digest_in(head.begin(), head.end());
  digest_in.insert(digest_in.end(), body.begin(), body.end());
  const std::string hex = sha256_hex(digest_in);
  std::vector<std::uint8_t> out(16);
  const auto m = static_cast<std::int64_t>(g.entries.size());
  std::memcpy(out.data(), &g.epoch, 8);
  std::memcpy(out.data() + 8, &m, 8);
  out.insert(out.end(), body.begin(), body.end());
  for (std::size_t k = 0; k < 32; ++k)
    out.push_back(static_cast<std::uint8_t>(std::stoi(hex.substr(2 * k, 2), nullptr, 16)));
  return out;
}

/// The bounds group of `record` (-1 when it has none), and a group's raw blob / key id or spare key
/// id (`column` next_key_id; empty when NULL) in a store with one memory.
inline std::int64_t group_of(RawDb& db, std::int64_t record) {
  return db.query_int("SELECT coalesce(bounds_group, -1) FROM records WHERE record = " +
                      std::to_string(record));
}
inline std::vector<std::uint8_t> group_blob(RawDb& db, std::int64_t group) {
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db.handle(), "SELECT bounds FROM bounds_groups WHERE group_id = ?1", -1, &q,
                     nullptr);
  sqlite3_bind_int64(q, 1, group);
  std::vector<std::uint8_t> b;
  if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) == SQLITE_BLOB) {
    const auto* p = static_cast<const std::uint8_t*>(sqlite3_column_blob(q, 0));
    b.assign(p, p + sqlite3_column_bytes(q, 0));
  }
  sqlite3_finalize(q);
  return b;
}
inline std::string group_key_id(RawDb& db, std::int64_t group, const char* column = "key_id") {
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db.handle(),
                     (std::string("SELECT ") + column + " FROM bounds_groups WHERE group_id = ?1")
                         .c_str(),
                     -1, &q, nullptr);
  sqlite3_bind_int64(q, 1, group);
  std::string k;
  if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) == SQLITE_TEXT)
    k = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
  sqlite3_finalize(q);
  return k;
}
inline void write_group_blob(RawDb& db, std::int64_t group, const std::vector<std::uint8_t>& b) {
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db.handle(), "UPDATE bounds_groups SET bounds = ?1 WHERE group_id = ?2", -1,
                     &q, nullptr);
  sqlite3_bind_blob(q, 1, b.data(), static_cast<int>(b.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(q, 2, group);
  const int rc = sqlite3_step(q);
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE) throw std::runtime_error("write_group_blob failed");
}

/// Adds `records` records of `per_record` tokens each, record ids in the given order, keys seeded
/// by the record id (so the same record always has the same keys).
inline void add_records(Store& store, const std::string& mem, const std::vector<std::int64_t>& ids,
                        int per_record, int d) {
  for (std::int64_t r : ids) {
    store.add_record(mem, r, random_keys(per_record, d, 1000 + static_cast<std::uint64_t>(r)));
  }
}

}  // namespace svattn::store_test
