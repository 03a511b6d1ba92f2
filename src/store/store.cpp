// The audited memory store (docs/store.md).
#include "svattn/store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <utility>

#include "sqlite_db.h"
#include "svattn/batch_solver.h"
#include "svattn/hash.h"
#include "svattn/kernel.h"
#include "svattn/readout.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the store writes fp64 blobs in native order and documents them as little-endian");

namespace svattn {

using store_detail::Database;
using store_detail::Statement;
using store_detail::Transaction;

namespace {

constexpr const char* kMagic = "svattn-store";
const std::string kZeroHash(64, '0');

// Partition codes of the support table.
constexpr int kPartMargin = 1;
constexpr int kPartError = 2;

const char* kSchemaSql = R"SQL(
CREATE TABLE meta(
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE memories(
  id                INTEGER PRIMARY KEY,
  name              TEXT    NOT NULL UNIQUE,
  settings          TEXT    NOT NULL,
  dim               INTEGER NOT NULL,
  value_dim         INTEGER NOT NULL,
  b                 REAL    NOT NULL,
  status            TEXT    NOT NULL,
  warmup            INTEGER NOT NULL,
  kkt_max_violation REAL    NOT NULL,
  kkt_sum_error     REAL    NOT NULL,
  kkt_box_violation REAL    NOT NULL,
  state_sha256      TEXT    NOT NULL,
  last_audit_seq    INTEGER NOT NULL,
  created_utc       TEXT    NOT NULL
);
CREATE TABLE records(
  memory_id INTEGER NOT NULL,
  record    INTEGER NOT NULL,
  suspended INTEGER NOT NULL DEFAULT 0,
  added_utc TEXT    NOT NULL,
  PRIMARY KEY(memory_id, record)
) WITHOUT ROWID;
CREATE TABLE tokens(
  rowid     INTEGER PRIMARY KEY,
  memory_id INTEGER NOT NULL,
  token_id  INTEGER NOT NULL,
  record    INTEGER NOT NULL,
  position  INTEGER NOT NULL,
  key       BLOB    NOT NULL,
  value     BLOB    NOT NULL,
  UNIQUE(memory_id, token_id)
);
CREATE TABLE support(
  memory_id INTEGER NOT NULL,
  token_id  INTEGER NOT NULL,
  part      INTEGER NOT NULL,
  alpha     REAL    NOT NULL,
  PRIMARY KEY(memory_id, token_id)
) WITHOUT ROWID;
CREATE TABLE audit(
  seq          INTEGER PRIMARY KEY,
  time_utc     TEXT    NOT NULL,
  operation    TEXT    NOT NULL,
  memory       TEXT    NOT NULL,
  record       INTEGER NOT NULL,
  token_count  INTEGER NOT NULL,
  state_before TEXT    NOT NULL,
  state_after  TEXT    NOT NULL,
  certificate  TEXT    NOT NULL,
  prev_hash    TEXT    NOT NULL,
  entry_hash   TEXT    NOT NULL
);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
)SQL";

std::string now_utc() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms.count()));
  return buf;
}

nlohmann::json diagnostics_to_json(const OpDiagnostics& d) {
  return {{"ops", d.ops},
          {"events", d.events},
          {"zero_steps", d.zero_steps},
          {"refused_entrants", d.refused_entrants},
          {"refactorizations", d.refactorizations},
          {"canonical_solves", d.canonical_solves},
          {"repairs", d.repairs},
          {"batch_fallbacks", d.batch_fallbacks},
          {"status", to_string(d.status)}};
}

nlohmann::json partition_sizes(const State& s) {
  return {{"margin", s.partition.margin.size()},
          {"error", s.partition.error.size()},
          {"reserve", s.partition.reserve.size()}};
}

// The outcome fields every operation's certificate carries.
void add_outcome_fields(nlohmann::json& cert, const Memory& mem, const State& after,
                        const OpDiagnostics& diagnostics) {
  cert["memory_tokens"] = mem.size();
  cert["partition_sizes"] = partition_sizes(after);
  cert["status"] = to_string(after.status);
  cert["diagnostics"] = diagnostics_to_json(diagnostics);
}

std::int64_t record_lo(std::int64_t record) { return record << kPositionBits; }
std::int64_t record_hi(std::int64_t record) { return (record << kPositionBits) | kMaxPosition; }

void check_record(std::int64_t record) {
  if (record < 0 || record > kMaxRecordId) {
    throw InvalidArgument("record id " + std::to_string(record) + " out of range [0, 2^40)");
  }
}

/// Support coefficients of a state: id -> (part, alpha) for margin and error tokens.
std::map<TokenId, std::pair<int, double>> support_map(const State& s) {
  std::map<TokenId, std::pair<int, double>> m;
  auto alpha_of = [&](TokenId id) {
    const auto it = std::lower_bound(s.ids.begin(), s.ids.end(), id);
    SVATTN_ASSERT(it != s.ids.end() && *it == id, "support id missing from state ids");
    return s.alpha[static_cast<std::size_t>(it - s.ids.begin())];
  };
  for (TokenId id : s.partition.margin) m[id] = {kPartMargin, alpha_of(id)};
  for (TokenId id : s.partition.error) m[id] = {kPartError, alpha_of(id)};
  return m;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

std::string fs_parent(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// file: URI of `path` with immutable=1 ('%', '?' and '#' percent-encoded).
std::string immutable_uri(const std::string& path) {
  std::string u = "file:";
  for (char ch : path) {
    if (ch == '%' || ch == '?' || ch == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(ch));
      u += buf;
    } else {
      u += ch;
    }
  }
  return u + "?immutable=1";
}

// nlohmann's serializer is the UTF-8 validator: it throws type_error 316 on an invalid sequence.
bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// Every number that enters the memories/support rows must be finite (NOT NULL REAL columns take a
// NaN as NULL): a non-finite b or alpha means the kernel is not representable for these settings.
void check_finite_state(const std::string& memory, const State& s) {
  bool finite = std::isfinite(s.b);
  for (double a : s.alpha) finite = finite && std::isfinite(a);
  if (!finite) {
    throw InvalidArgument(
        "memory '" + memory +
        "': the operation produced a non-finite state (b = " + std::to_string(s.b) +
        "); the kernel is not representable for these settings (check "
        "--bandwidth); nothing was written");
  }
}

struct MemoryRow {
  std::int64_t id = 0;
  std::string name;
  MemorySettings settings;
  int dim = 0;
  int value_dim = 0;
  double b = 0;
  Status status = Status::kEmpty;
  bool warmup = false;
  KktReport kkt;
  std::string state_sha256;
  std::int64_t last_audit_seq = 0;
};

struct ImportPlan;  // bulk import (end of file)

// What a query needs: the support (alpha > 0, ascending id) and b of the stored state.
struct StoredSupport {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  int dim = 0;
  int value_dim = 0;
  KernelSettings kernel;
  double b = 0;
  Support support;
};

struct Cached {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  std::unique_ptr<Memory> memory;
};

}  // namespace

struct Store::Impl {
  std::string path;
  StoreOptions options;
  Database db;
  std::map<std::string, Cached> cache;
  std::map<std::string, StoredSupport> supports;
  const StoredSupport& stored_support(const std::string& name);

  // ------------------------------------------------------------------------------ opening
  void open() {
    struct stat st {};
    const bool exists = ::stat(path.c_str(), &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) throw IoError("store '" + path + "' is not a regular file");
    if (!exists && !options.create) throw IoError("store '" + path + "' does not exist");
    bool fresh = !exists || st.st_size == 0;
    if (fresh && !options.create) {
      throw FormatError("'" + path + "' is empty: not a svattn store");
    }
    if (!fresh) {
      if (st.st_size < 100) {
        throw FormatError("'" + path + "' is not a svattn store (" + std::to_string(st.st_size) +
                          " bytes: too short for an SQLite header)");
      }
      char header[16] = {};
      std::ifstream in(path, std::ios::binary);
      if (!in) throw IoError("cannot read '" + path + "'");
      in.read(header, 16);
      if (!in || std::memcmp(header, "SQLite format 3\0", 16) != 0) {
        throw FormatError("'" + path + "' is not a svattn store (not an SQLite database)");
      }
    }
    if (fresh && options.read_only) {
      throw InvalidArgument("store '" + path + "' does not exist (cannot create it read-only)");
    }
    int flags =
        (options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_FULLMUTEX;
    if (fresh) flags |= SQLITE_OPEN_CREATE;
    if (options.read_only && cannot_share_wal()) {
      // A WAL reader needs the -shm file; in a directory the user cannot write it cannot be made.
      // With no -wal file the database file is complete, so it is opened immutable (docs/store.md).
      db = Database(immutable_uri(path), flags | SQLITE_OPEN_URI);
    } else {
      db = Database(path, flags);
    }
    sqlite3_busy_timeout(db.handle(), options.busy_timeout_ms);
    if (fresh) {
      db.exec("PRAGMA journal_mode=WAL");
      initialise_schema();
    }
    validate_existing();
    if (options.read_only) return;  // connection settings below only matter to writers
    db.exec("PRAGMA secure_delete=ON");
    db.exec("PRAGMA synchronous=FULL");
    const std::string mode = db.query_text("PRAGMA journal_mode=WAL");
    if (mode != "wal")
      throw StoreError("store '" + path + "': cannot enable WAL mode (" + mode + ")");
  }

  bool cannot_share_wal() const {
    const std::string dir = fs_parent(path);
    return ::access((path + "-wal").c_str(), F_OK) != 0 &&
           ::access((path + "-shm").c_str(), F_OK) != 0 && ::access(dir.c_str(), W_OK) != 0;
  }

  void require_writable() const {
    if (options.read_only) {
      throw InvalidArgument("store '" + path + "' was opened read-only (StoreOptions::read_only)");
    }
  }

  void initialise_schema() {
    Transaction t(db, true, path, options.busy_timeout_ms);
    // Another process may have initialised the file between our stat and the lock.
    if (db.query_int("PRAGMA user_version") != 0 ||
        db.query_int("SELECT count(*) FROM sqlite_master") != 0) {
      return;  // rolled back (nothing written); validate_existing() checks what is there
    }
    db.exec(kSchemaSql);
    db.exec("PRAGMA application_id=" + std::to_string(kStoreApplicationId));
    db.exec("PRAGMA user_version=" + std::to_string(kStoreSchemaVersion));
    Statement ins(db.handle(), "INSERT INTO meta(key, value) VALUES (?1, ?2)");
    const std::pair<const char*, std::string> rows[] = {
        {"magic", kMagic},          {"schema_version", std::to_string(kStoreSchemaVersion)},
        {"created_utc", now_utc()}, {"token_id_layout", "record << 23 | position"},
        {"audit_head_seq", "0"},    {"audit_head_hash", kZeroHash}};
    for (const auto& [k, v] : rows) {
      ins.bind(1, std::string(k)).bind(2, v).run();
      ins.reset();
    }
    t.commit();
  }

  void validate_existing() {
    const std::string not_store = "'" + path + "' is not a svattn store";
    std::int64_t app_id = 0;
    std::int64_t version = 0;
    try {
      app_id = db.query_int("PRAGMA application_id");
      version = db.query_int("PRAGMA user_version");
    } catch (const FormatError& e) {
      throw FormatError(not_store + " or is corrupted: " + e.what());
    }
    if (app_id != kStoreApplicationId) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%08llx", static_cast<unsigned long long>(app_id));
      throw FormatError(not_store + " (SQLite application_id " + buf + ", expected 0x53564154)");
    }
    if (version > kStoreSchemaVersion) {
      throw FormatError("store '" + path + "' has schema version " + std::to_string(version) +
                        ", newer than this svattn supports (" +
                        std::to_string(kStoreSchemaVersion) + "); upgrade svattn");
    }
    if (version < 1) {
      throw FormatError(not_store + " (schema version " + std::to_string(version) + ")");
    }
    if (options.check_on_open) {
      std::string first;
      try {
        Statement q(db.handle(), "PRAGMA quick_check");
        if (q.step()) first = q.text(0);
      } catch (const Error& e) {
        throw FormatError("store '" + path + "' is corrupted or truncated: " + e.what());
      }
      if (first != "ok") {
        throw FormatError("store '" + path + "' is corrupted or truncated: " + first);
      }
    }
    std::string magic;
    try {
      Statement q(db.handle(), "SELECT value FROM meta WHERE key = 'magic'");
      if (q.step()) magic = q.text(0);
    } catch (const StoreError& e) {
      throw FormatError(not_store + " (no meta table: " + e.what() + ")");
    }
    if (magic != kMagic) throw FormatError(not_store + " (meta magic '" + magic + "')");
    std::string meta_version;
    {
      Statement q(db.handle(), "SELECT value FROM meta WHERE key = 'schema_version'");
      if (q.step()) meta_version = q.text(0);
    }
    if (meta_version != std::to_string(version)) {
      throw FormatError("store '" + path + "': unsupported schema version " +
                        (meta_version.empty() ? std::string("(missing)") : meta_version) +
                        " in the meta table (the file header says " + std::to_string(version) +
                        "; this svattn supports " + std::to_string(kStoreSchemaVersion) + ")");
    }
  }

  // ------------------------------------------------------------------------------ reading
  MemoryRow read_memory_row(const std::string& name) {
    Statement q(db.handle(),
                "SELECT id, name, settings, dim, value_dim, b, status, warmup, kkt_max_violation, "
                "kkt_sum_error, kkt_box_violation, state_sha256, last_audit_seq FROM memories "
                "WHERE name = ?1");
    q.bind(1, name);
    if (!q.step()) throw NotFound("store '" + path + "' has no memory '" + name + "'");
    MemoryRow r;
    r.id = q.int64(0);
    r.name = q.text(1);
    const nlohmann::json sj = nlohmann::json::parse(q.text(2), nullptr, false);
    if (sj.is_discarded()) throw FormatError("memory '" + name + "': settings are not JSON");
    r.settings = memory_settings_from_json(sj);
    r.dim = static_cast<int>(q.int64(3));
    r.value_dim = static_cast<int>(q.int64(4));
    r.b = q.real(5);
    r.status = status_from_string(q.text(6));
    r.warmup = q.int64(7) != 0;
    r.kkt.max_violation = q.real(8);
    r.kkt.sum_error = q.real(9);
    r.kkt.box_violation = q.real(10);
    r.state_sha256 = q.text(11);
    r.last_audit_seq = q.int64(12);
    return r;
  }

  std::vector<MemoryRow> all_memory_rows() {
    std::vector<std::string> names;
    Statement q(db.handle(), "SELECT name FROM memories ORDER BY name");
    while (q.step()) names.push_back(q.text(0));
    std::vector<MemoryRow> rows;
    for (const std::string& n : names) rows.push_back(read_memory_row(n));
    return rows;
  }

  void decode_row(const Statement& q, int col, int cols, double* out, const char* what,
                  TokenId id) {
    const std::size_t need = static_cast<std::size_t>(cols) * sizeof(double);
    if (static_cast<std::size_t>(q.bytes(col)) != need) {
      throw FormatError("store '" + path + "': token " + std::to_string(id) + " has a " + what +
                        " blob of " + std::to_string(q.bytes(col)) + " bytes, expected " +
                        std::to_string(need));
    }
    if (need > 0) std::memcpy(out, q.blob_data(col), need);
  }

  /// Tokens of the memory's active (not suspended) records, ascending id.
  TokenSet load_active_tokens(const MemoryRow& row) {
    const std::int64_t n = [&] {
      Statement c(db.handle(),
                  "SELECT count(*) FROM tokens t JOIN records r ON r.memory_id = t.memory_id AND "
                  "r.record = t.record WHERE t.memory_id = ?1 AND r.suspended = 0");
      c.bind(1, row.id);
      c.step();
      return c.int64(0);
    }();
    TokenSet ts;
    ts.ids.reserve(static_cast<std::size_t>(n));
    ts.keys.resize(n, row.dim);
    ts.values.resize(n, row.value_dim);
    Statement q(db.handle(),
                "SELECT t.token_id, t.key, t.value FROM tokens t JOIN records r ON r.memory_id = "
                "t.memory_id AND r.record = t.record WHERE t.memory_id = ?1 AND r.suspended = 0 "
                "ORDER BY t.token_id");
    q.bind(1, row.id);
    Eigen::Index i = 0;
    while (q.step()) {
      if (i >= n) throw StoreError("store '" + path + "': token count changed while reading");
      const TokenId id = q.int64(0);
      ts.ids.push_back(id);
      decode_row(q, 1, row.dim, ts.keys.row(i).data(), "key", id);
      decode_row(q, 2, row.value_dim, ts.values.row(i).data(), "value", id);
      ++i;
    }
    if (i != n) throw StoreError("store '" + path + "': token count changed while reading");
    return ts;
  }

  /// The state as stored: ids from the active tokens, alpha/partition from the support table.
  State load_state(const MemoryRow& row, const std::vector<TokenId>& ids) {
    State s;
    s.settings = row.settings.problem;
    s.dim = row.dim;
    s.value_dim = row.value_dim;
    s.ids = ids;
    s.alpha.assign(ids.size(), 0.0);
    s.b = row.b;
    s.kkt = row.kkt;
    s.status = row.status;
    s.warmup = row.warmup;
    s.state_sha256 = row.state_sha256;
    std::vector<char> in_support(ids.size(), 0);
    Statement q(db.handle(),
                "SELECT token_id, part, alpha FROM support WHERE memory_id = ?1 ORDER BY token_id");
    q.bind(1, row.id);
    while (q.step()) {
      const TokenId id = q.int64(0);
      const auto it = std::lower_bound(ids.begin(), ids.end(), id);
      if (it == ids.end() || *it != id) {
        throw FormatError("memory '" + row.name + "': support token " + std::to_string(id) +
                          " is not an active token of the memory (corrupted store)");
      }
      const std::size_t k = static_cast<std::size_t>(it - ids.begin());
      s.alpha[k] = q.real(2);
      in_support[k] = 1;
      const std::int64_t part = q.int64(1);
      if (part == kPartMargin) {
        s.partition.margin.push_back(id);
      } else if (part == kPartError) {
        s.partition.error.push_back(id);
      } else {
        throw FormatError("memory '" + row.name + "': bad partition code " + std::to_string(part));
      }
    }
    for (std::size_t k = 0; k < ids.size(); ++k) {
      if (in_support[k] == 0) s.partition.reserve.push_back(ids[k]);
    }
    return s;
  }

  /// The in-RAM memory of `row`, restored from the file when absent or stale.
  Cached& ensure_loaded(const MemoryRow& row) {
    auto it = cache.find(row.name);
    if (it != cache.end() && it->second.id == row.id && it->second.seq == row.last_audit_seq) {
      return it->second;
    }
    cache.erase(row.name);
    const TokenSet tokens = load_active_tokens(row);
    const State state = load_state(row, tokens.ids);
    OpDiagnostics diag;
    Memory mem = [&] {
      try {
        return Memory::restore(row.settings, tokens, state, &diag);
      } catch (const InvalidArgument& e) {
        throw FormatError("memory '" + row.name +
                          "': stored state cannot be restored: " + e.what());
      }
    }();
    if (diag.batch_fallbacks > 0) {
      std::fprintf(stderr,
                   "svattn: warning: memory '%s': the stored state did not check against its "
                   "tokens; it was re-solved from the tokens (not used)\n",
                   row.name.c_str());
    }
    if (mem.state_sha256() != row.state_sha256) {
      throw FormatError("memory '" + row.name + "' in store '" + path +
                        "': the stored state does not match its tokens (stored " +
                        row.state_sha256.substr(0, 16) + "…, tokens give " +
                        mem.state_sha256().substr(0, 16) +
                        "…); the store is corrupted, run `svattn memory verify`");
    }
    Cached c;
    c.id = row.id;
    c.seq = row.last_audit_seq;
    c.memory = std::make_unique<Memory>(std::move(mem));
    return cache[row.name] = std::move(c);
  }

  // ------------------------------------------------------------------------------ writing
  /// Writes the support diff between `before` and `after` and the memories row of `after`.
  void write_state(std::int64_t memory_id, const State& before, const State& after,
                   std::int64_t seq, const std::string& memory) {
    check_finite_state(memory, after);
    const auto old_sup = support_map(before);
    const auto new_sup = support_map(after);
    Statement del(db.handle(), "DELETE FROM support WHERE memory_id = ?1 AND token_id = ?2");
    Statement put(db.handle(),
                  "INSERT INTO support(memory_id, token_id, part, alpha) VALUES (?1, ?2, ?3, ?4) "
                  "ON CONFLICT(memory_id, token_id) DO UPDATE SET part = excluded.part, "
                  "alpha = excluded.alpha");
    for (const auto& [id, pa] : old_sup) {
      if (new_sup.find(id) == new_sup.end()) {
        del.bind(1, memory_id).bind(2, static_cast<std::int64_t>(id)).run();
        del.reset();
      }
    }
    for (const auto& [id, pa] : new_sup) {
      const auto it = old_sup.find(id);
      if (it != old_sup.end() && it->second.first == pa.first &&
          same_bits(it->second.second, pa.second)) {
        continue;
      }
      put.bind(1, memory_id)
          .bind(2, static_cast<std::int64_t>(id))
          .bind(3, static_cast<std::int64_t>(pa.first))
          .bind(4, pa.second)
          .run();
      put.reset();
    }
    Statement up(db.handle(),
                 "UPDATE memories SET b = ?2, status = ?3, warmup = ?4, kkt_max_violation = ?5, "
                 "kkt_sum_error = ?6, kkt_box_violation = ?7, state_sha256 = ?8, "
                 "last_audit_seq = ?9 WHERE id = ?1");
    up.bind(1, memory_id)
        .bind(2, after.b)
        .bind(3, to_string(after.status))
        .bind(4, static_cast<std::int64_t>(after.warmup ? 1 : 0))
        .bind(5, after.kkt.max_violation)
        .bind(6, after.kkt.sum_error)
        .bind(7, after.kkt.box_violation)
        .bind(8, after.state_sha256)
        .bind(9, seq)
        .run();
  }

  std::int64_t next_seq_and_head(std::string* head) {
    Statement q(db.handle(), "SELECT seq, entry_hash FROM audit ORDER BY seq DESC LIMIT 1");
    if (q.step()) {
      *head = q.text(1);
      return q.int64(0) + 1;
    }
    *head = kZeroHash;
    return 1;
  }

  /// Fills seq, time, prev_hash and entry_hash, inserts the row, moves the head anchor.
  // The fields every record operation's audit entry shares.
  static void fill_entry(AuditEntry& e, const char* operation, const std::string& memory,
                         std::int64_t record, std::int64_t token_count, const State& before,
                         const State& after) {
    e.operation = operation;
    e.memory = memory;
    e.record = record;
    e.token_count = token_count;
    e.state_before = before.state_sha256;
    e.state_after = after.state_sha256;
  }

  // Appends the audit entry, stores the new state and commits, timing the commit.
  void log_and_commit(AuditEntry& e, std::int64_t memory_id, const State& before,
                      const State& after, Transaction& t, Cached& c, OpResult& res) {
    append_audit(e);
    write_state(memory_id, before, after, e.seq, e.memory);
    res.memory_tokens = c.memory->size();
    {
      Statement q(db.handle(), "SELECT count(*) FROM records WHERE memory_id = ?1");
      q.bind(1, memory_id);
      q.step();
      res.memory_records = q.int64(0);
    }
    const auto k0 = std::chrono::steady_clock::now();
    t.commit();
    res.commit_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - k0).count();
    c.seq = e.seq;
  }

  void append_audit(AuditEntry& e) {
    e.seq = next_seq_and_head(&e.prev_hash);
    e.time_utc = now_utc();
    e.entry_hash = sha256_hex(canonical_audit_bytes(e));
    Statement ins(db.handle(),
                  "INSERT INTO audit(seq, time_utc, operation, memory, record, token_count, "
                  "state_before, state_after, certificate, prev_hash, entry_hash) VALUES "
                  "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
    ins.bind(1, e.seq)
        .bind(2, e.time_utc)
        .bind(3, e.operation)
        .bind(4, e.memory)
        .bind(5, e.record)
        .bind(6, e.token_count)
        .bind(7, e.state_before)
        .bind(8, e.state_after)
        .bind(9, e.certificate)
        .bind(10, e.prev_hash)
        .bind(11, e.entry_hash)
        .run();
    Statement meta(db.handle(), "UPDATE meta SET value = ?2 WHERE key = ?1");
    meta.bind(1, std::string("audit_head_seq")).bind(2, std::to_string(e.seq)).run();
    meta.reset();
    meta.bind(1, std::string("audit_head_hash")).bind(2, e.entry_hash).run();
  }

  void insert_tokens(std::int64_t memory_id, const TokenSet& ts, const Memory& mem) {
    Statement ins(db.handle(),
                  "INSERT INTO tokens(memory_id, token_id, record, position, key, value) VALUES "
                  "(?1, ?2, ?3, ?4, ?5, ?6)");
    for (int i = 0; i < ts.size(); ++i) {
      const TokenId id = ts.ids[static_cast<std::size_t>(i)];
      if (!mem.contains(id)) continue;  // bounded mode evicted it on arrival: not retained
      ins.bind(1, memory_id)
          .bind(2, static_cast<std::int64_t>(id))
          .bind(3, record_of(id))
          .bind(4, position_of(id))
          .bind_blob(5, ts.keys.row(i).data(),
                     sizeof(double) * static_cast<std::size_t>(ts.keys.cols()))
          .bind_blob(6, ts.values.row(i).data(),
                     sizeof(double) * static_cast<std::size_t>(ts.values.cols()))
          .run();
      ins.reset();
    }
  }

  /// Bounded mode: tokens that were in the memory before (and not removed on purpose) but are no
  /// longer retained are deleted from the file. Returns how many.
  std::int64_t delete_evicted(std::int64_t memory_id, const State& before, const Memory& mem,
                              const std::vector<TokenId>& removed_on_purpose) {
    std::int64_t n = 0;
    Statement del(db.handle(), "DELETE FROM tokens WHERE memory_id = ?1 AND token_id = ?2");
    for (TokenId id : before.ids) {
      if (mem.contains(id)) continue;
      if (std::binary_search(removed_on_purpose.begin(), removed_on_purpose.end(), id)) continue;
      del.bind(1, memory_id).bind(2, static_cast<std::int64_t>(id)).run();
      del.reset();
      ++n;
    }
    return n;
  }

  struct RecordRow {
    bool exists = false;
    bool suspended = false;
  };
  RecordRow read_record(std::int64_t memory_id, std::int64_t record) {
    Statement q(db.handle(), "SELECT suspended FROM records WHERE memory_id = ?1 AND record = ?2");
    q.bind(1, memory_id).bind(2, record);
    RecordRow r;
    if (q.step()) {
      r.exists = true;
      r.suspended = q.int64(0) != 0;
    }
    return r;
  }

  /// Token rows of a record (ascending id), with keys and values when `with_data`.
  TokenSet record_tokens(const MemoryRow& row, std::int64_t record) {
    Statement q(db.handle(),
                "SELECT token_id, key, value FROM tokens WHERE memory_id = ?1 AND token_id "
                "BETWEEN ?2 AND ?3 ORDER BY token_id");
    q.bind(1, row.id).bind(2, record_lo(record)).bind(3, record_hi(record));
    std::vector<TokenId> ids;
    std::vector<double> keys;
    std::vector<double> values;
    while (q.step()) {
      const TokenId id = q.int64(0);
      ids.push_back(id);
      keys.resize(keys.size() + static_cast<std::size_t>(row.dim));
      values.resize(values.size() + static_cast<std::size_t>(row.value_dim));
      decode_row(q, 1, row.dim, keys.data() + keys.size() - row.dim, "key", id);
      decode_row(q, 2, row.value_dim, values.data() + values.size() - row.value_dim, "value", id);
    }
    TokenSet ts;
    const auto n = static_cast<Eigen::Index>(ids.size());
    ts.ids = std::move(ids);
    ts.keys = Eigen::Map<const RowMatrix>(keys.data(), n, row.dim);
    ts.values = Eigen::Map<const RowMatrix>(values.data(), n, row.value_dim);
    return ts;
  }

  void checkpoint(bool* truncated) {
    int log = 0;
    int done = 0;
    const int rc =
        sqlite3_wal_checkpoint_v2(db.handle(), "main", SQLITE_CHECKPOINT_TRUNCATE, &log, &done);
    *truncated = rc == SQLITE_OK;
  }

  /// Runs `f(row, cached)` inside one BEGIN IMMEDIATE transaction on memory `name`. `f` commits.
  /// On any exception the transaction is rolled back and the in-RAM memory dropped (it is
  /// restored from the file on next use), so neither the file nor the object changes.
  template <class F>
  auto mutate(const std::string& name, F&& f) {
    require_writable();
    Transaction t(db, true, path, options.busy_timeout_ms);
    const MemoryRow row = read_memory_row(name);
    Cached& c = ensure_loaded(row);
    try {
      return f(row, c, t);
    } catch (...) {
      t.rollback();
      cache.erase(name);
      throw;
    }
  }

  std::vector<AuditEntry> read_audit();
  AuditEntry import_chunk(const std::string& name, const ImportPlan& plan,
                          const std::vector<std::size_t>& chunk, const RowMatrix& keys,
                          const RowMatrix& vals, ImportProgress& totals);
  bool tables_present(std::vector<std::string>& problems);
  void check_orphans(std::vector<std::string>& problems);
  MemoryVerification verify_memory(const MemoryRow& row,
                                   const std::pair<std::string, std::int64_t>* last_audit,
                                   const std::vector<AuditEntry>& entries,
                                   std::vector<std::string>& problems,
                                   std::vector<std::string>& notes);

  template <class F>
  auto read(F&& f) {
    Transaction t(db, false, path, options.busy_timeout_ms);
    auto r = f();
    t.commit();
    return r;
  }
};

// ================================================================================== Store

Store::Store(const std::string& path, const StoreOptions& options)
    : impl_(std::make_unique<Impl>()) {
  if (options.busy_timeout_ms < 0) {
    throw InvalidArgument("busy_timeout_ms must be >= 0, got " +
                          std::to_string(options.busy_timeout_ms));
  }
  if (options.certificate_probes < 0) {
    throw InvalidArgument("certificate_probes must be >= 0, got " +
                          std::to_string(options.certificate_probes));
  }
  if (options.read_only && options.create) {
    throw InvalidArgument("StoreOptions: read_only and create exclude each other");
  }
  // Paths enter certificates and JSON output, which must be valid UTF-8 (issue 18).
  if (!valid_utf8(path)) throw InvalidArgument("store path is not valid UTF-8");
  impl_->path = path;
  impl_->options = options;
  impl_->open();
}

Store::~Store() {
  if (impl_ && impl_->db.handle() != nullptr) {
    bool truncated = false;
    if (!impl_->options.read_only) impl_->checkpoint(&truncated);
    impl_->db.close();
  }
}

Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

const std::string& Store::path() const { return impl_->path; }
const StoreOptions& Store::options() const { return impl_->options; }

OpResult Store::create_memory(const std::string& name, const MemorySettings& settings, int dim,
                              int value_dim) {
  validate_memory_name(name);
  impl_->require_writable();
  if (dim < 1)
    throw InvalidArgument("key dimension (dim) must be >= 1, got " + std::to_string(dim));
  if (value_dim < 1) {
    throw InvalidArgument("value dimension must be >= 1, got " + std::to_string(value_dim));
  }
  settings.validate();
  settings.problem.validate();
  Impl& im = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  Transaction t(im.db, true, im.path, im.options.busy_timeout_ms);
  {
    Statement q(im.db.handle(), "SELECT 1 FROM memories WHERE name = ?1");
    q.bind(1, name);
    if (q.step())
      throw AlreadyExists("store '" + im.path + "' already has a memory '" + name + "'");
  }
  Memory mem(settings, dim, value_dim);
  const State s = mem.state();
  OpResult res;
  AuditEntry& e = res.entry;
  e.operation = "create";
  e.memory = name;
  e.record = -1;
  e.token_count = 0;
  e.state_before = "";
  e.state_after = s.state_sha256;
  e.certificate = nlohmann::json{
      {"settings", memory_settings_to_json(settings)},
      {"dim", dim},
      {"value_dim",
       value_dim}}.dump();
  im.append_audit(e);
  Statement ins(im.db.handle(),
                "INSERT INTO memories(name, settings, dim, value_dim, b, status, warmup, "
                "kkt_max_violation, kkt_sum_error, kkt_box_violation, state_sha256, "
                "last_audit_seq, created_utc) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
                "?11, ?12, ?13)");
  ins.bind(1, name)
      .bind(2, memory_settings_to_json(settings).dump())
      .bind(3, static_cast<std::int64_t>(dim))
      .bind(4, static_cast<std::int64_t>(value_dim))
      .bind(5, s.b)
      .bind(6, to_string(s.status))
      .bind(7, static_cast<std::int64_t>(s.warmup ? 1 : 0))
      .bind(8, s.kkt.max_violation)
      .bind(9, s.kkt.sum_error)
      .bind(10, s.kkt.box_violation)
      .bind(11, s.state_sha256)
      .bind(12, e.seq)
      .bind(13, e.time_utc)
      .run();
  t.commit();
  res.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

void Store::validate_memory_name(const std::string& name) {
  if (name.empty() || name.size() > 256) {
    throw InvalidArgument("memory name must have 1 to 256 bytes, got " +
                          std::to_string(name.size()));
  }
  for (char ch : name) {
    if (static_cast<unsigned char>(ch) < 0x20) {
      throw InvalidArgument("memory name must not contain control characters");
    }
  }
  if (!valid_utf8(name)) throw InvalidArgument("memory name is not valid UTF-8");
}

std::vector<std::string> Store::memory_names() const {
  Impl& im = *impl_;
  return im.read([&] {
    std::vector<std::string> names;
    Statement q(im.db.handle(), "SELECT name FROM memories ORDER BY name");
    while (q.step()) names.push_back(q.text(0));
    return names;
  });
}

bool Store::has_memory(const std::string& name) const {
  Impl& im = *impl_;
  return im.read([&] {
    Statement q(im.db.handle(), "SELECT 1 FROM memories WHERE name = ?1");
    q.bind(1, name);
    return q.step();
  });
}

MemoryInfo Store::memory_info(const std::string& name) const {
  Impl& im = *impl_;
  return im.read([&] {
    const MemoryRow row = im.read_memory_row(name);
    MemoryInfo info;
    info.name = row.name;
    info.settings = row.settings;
    info.dim = row.dim;
    info.value_dim = row.value_dim;
    info.state_sha256 = row.state_sha256;
    info.last_audit_seq = row.last_audit_seq;
    info.b = row.b;
    info.status = row.status;
    info.warmup = row.warmup;
    // Index-only counts (no join over the token rows): all rows, minus the suspended records'
    // rows found by token_id range, plus the support table's margin/error counts.
    Statement q(im.db.handle(), "SELECT count(*) FROM tokens WHERE memory_id = ?1");
    q.bind(1, row.id);
    q.step();
    info.stored_tokens = static_cast<int>(q.int64(0));
    Statement sq(im.db.handle(),
                 "SELECT coalesce(sum((SELECT count(*) FROM tokens t WHERE t.memory_id = "
                 "r.memory_id AND t.token_id BETWEEN (r.record << 23) AND ((r.record << 23) | "
                 "8388607))), 0) FROM records r WHERE r.memory_id = ?1 AND r.suspended = 1");
    sq.bind(1, row.id);
    sq.step();
    info.tokens = info.stored_tokens - static_cast<int>(sq.int64(0));
    Statement pq(im.db.handle(),
                 "SELECT coalesce(sum(part = 1), 0), coalesce(sum(part = 2), 0) FROM support "
                 "WHERE memory_id = ?1");
    pq.bind(1, row.id);
    pq.step();
    info.margin = static_cast<int>(pq.int64(0));
    info.error = static_cast<int>(pq.int64(1));
    Statement r(im.db.handle(),
                "SELECT count(*), coalesce(sum(suspended), 0) FROM records WHERE memory_id = ?1");
    r.bind(1, row.id);
    r.step();
    info.records = static_cast<int>(r.int64(0));
    info.suspended_records = static_cast<int>(r.int64(1));
    return info;
  });
}

std::vector<RecordInfo> Store::records(const std::string& name) const {
  Impl& im = *impl_;
  return im.read([&] {
    const MemoryRow row = im.read_memory_row(name);
    std::vector<RecordInfo> out;
    Statement q(im.db.handle(),
                "SELECT r.record, r.suspended, (SELECT count(*) FROM tokens t WHERE t.memory_id = "
                "r.memory_id AND t.token_id BETWEEN (r.record << 23) AND ((r.record << 23) | "
                "8388607)) FROM records r WHERE r.memory_id = ?1 ORDER BY r.record");
    q.bind(1, row.id);
    while (q.step()) {
      RecordInfo ri;
      ri.record = q.int64(0);
      ri.suspended = q.int64(1) != 0;
      ri.tokens = static_cast<int>(q.int64(2));
      out.push_back(ri);
    }
    return out;
  });
}

const Memory& Store::memory(const std::string& name) {
  Impl& im = *impl_;
  return *im.read([&] { return im.ensure_loaded(im.read_memory_row(name)).memory.get(); });
}

State Store::stored_state(const std::string& name) const {
  Impl& im = *impl_;
  return im.read([&] {
    const MemoryRow row = im.read_memory_row(name);
    std::vector<TokenId> ids;
    Statement q(im.db.handle(),
                "SELECT t.token_id FROM tokens t JOIN records r ON r.memory_id = t.memory_id AND "
                "r.record = t.record WHERE t.memory_id = ?1 AND r.suspended = 0 ORDER BY "
                "t.token_id");
    q.bind(1, row.id);
    while (q.step()) ids.push_back(q.int64(0));
    return im.load_state(row, ids);
  });
}

OpResult Store::add_record(const std::string& name, std::int64_t record, const RowMatrix& keys,
                           const RowMatrix* values) {
  check_record(record);
  Impl& im = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  return im.mutate(name, [&](const MemoryRow& row, Cached& c, Transaction& t) {
    Memory& mem = *c.memory;
    if (im.read_record(row.id, record).exists) {
      throw AlreadyExists("memory '" + name + "' already has record " + std::to_string(record));
    }
    if (keys.rows() < 1)
      throw InvalidArgument("record " + std::to_string(record) + " has no tokens");
    if (keys.rows() > kMaxPosition + 1) {
      throw InvalidArgument("record " + std::to_string(record) + " has " +
                            std::to_string(keys.rows()) + " tokens, more than 2^23");
    }
    if (keys.cols() != row.dim) {
      throw InvalidArgument("dimension mismatch: memory '" + name + "' has key dimension " +
                            std::to_string(row.dim) + ", the keys have " +
                            std::to_string(keys.cols()) + " columns");
    }
    const RowMatrix& vals = values != nullptr ? *values : keys;
    if (vals.cols() != row.value_dim) {
      throw InvalidArgument("dimension mismatch: memory '" + name + "' has value dimension " +
                            std::to_string(row.value_dim) + ", the values have " +
                            std::to_string(vals.cols()) + " columns" +
                            (values == nullptr ? " (values default to the keys)" : ""));
    }
    if (vals.rows() != keys.rows()) {
      throw InvalidArgument("keys have " + std::to_string(keys.rows()) + " rows but values have " +
                            std::to_string(vals.rows()));
    }
    TokenSet ts;
    ts.keys = keys;
    ts.values = vals;
    for (Eigen::Index i = 0; i < keys.rows(); ++i) ts.ids.push_back(store_token_id(record, i));
    ts.validate();
    const State before = mem.state();
    const auto m0 = std::chrono::steady_clock::now();
    OpResult res;
    res.diagnostics = mem.add_batch(ts);
    res.memory_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
    const State after = mem.state();
    Statement rec(
        im.db.handle(),
        "INSERT INTO records(memory_id, record, suspended, added_utc) VALUES (?1, ?2, 0, ?3)");
    rec.bind(1, row.id).bind(2, record).bind(3, now_utc()).run();
    im.insert_tokens(row.id, ts, mem);
    const std::int64_t evicted = im.delete_evicted(row.id, before, mem, {});
    std::int64_t evicted_new = 0;
    for (TokenId id : ts.ids) evicted_new += mem.contains(id) ? 0 : 1;
    AuditEntry& e = res.entry;
    im.fill_entry(e, "add", name, record, ts.size(), before, after);
    nlohmann::json cert{
        {"operation", "add"},
        {"record", record},
        {"tokens", ts.size()},
        {"first_token_id", ts.ids.front()},
        {"last_token_id", ts.ids.back()},
    };
    add_outcome_fields(cert, mem, after, res.diagnostics);
    if (row.settings.mode == MemoryMode::kBounded) {
      cert["evicted_on_arrival"] = evicted_new;
      cert["evicted_retained"] = evicted;
    }
    e.certificate = cert.dump();
    im.log_and_commit(e, row.id, before, after, t, c, res);
    res.total_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
  });
}

ForgetResult Store::forget_record(const std::string& name, std::int64_t record) {
  check_record(record);
  Impl& im = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  ForgetResult res = im.mutate(name, [&](const MemoryRow& row, Cached& c, Transaction& t) {
    Memory& mem = *c.memory;
    const auto rr = im.read_record(row.id, record);
    if (!rr.exists) {
      throw NotFound("memory '" + name + "' has no record " + std::to_string(record));
    }
    const TokenSet rec = im.record_tokens(row, record);
    std::vector<TokenId> in_memory;
    if (!rr.suspended) {
      for (TokenId id : rec.ids) {
        if (mem.contains(id)) in_memory.push_back(id);
      }
    }
    // Probes: the erased keys themselves (where a leftover would show most), then retained
    // support keys. Only the maximal readout deviation enters the certificate.
    const int max_probes = im.options.certificate_probes;
    std::vector<const double*> probe_rows;
    for (int i = 0; i < rec.size() && static_cast<int>(probe_rows.size()) < max_probes; ++i) {
      probe_rows.push_back(rec.keys.row(i).data());
    }
    RowMatrix probes(static_cast<Eigen::Index>(probe_rows.size()), row.dim);
    for (std::size_t i = 0; i < probe_rows.size(); ++i) {
      probes.row(static_cast<Eigen::Index>(i)) =
          Eigen::Map<const Eigen::RowVectorXd>(probe_rows[i], row.dim);
    }
    const State before = mem.state();
    ForgetResult fr;
    const auto m0 = std::chrono::steady_clock::now();
    fr.diagnostics = mem.remove_batch(in_memory);
    fr.memory_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
    const auto c0 = std::chrono::steady_clock::now();
    CertificateOptions co;
    co.optimality_check = im.options.certificate_check;
    co.allow_reference = im.options.certificate_reference;
    co.resolve = im.options.certificate_resolve;
    fr.certificate = removal_certificate(before, mem, in_memory, std::to_string(record),
                                         fr.diagnostics, co, probes);
    fr.certificate_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    StoreErasure se;
    se.path = im.path;
    se.memory = name;
    se.record = record;
    se.record_was_suspended = rr.suspended;
    se.token_rows_erased = rec.size();
    se.tokens_removed_from_memory = static_cast<std::int64_t>(in_memory.size());
    fr.certificate.store = se;
    const State after = mem.state();
    Statement del(im.db.handle(),
                  "DELETE FROM tokens WHERE memory_id = ?1 AND token_id BETWEEN ?2 AND ?3");
    del.bind(1, row.id).bind(2, record_lo(record)).bind(3, record_hi(record)).run();
    Statement delr(im.db.handle(), "DELETE FROM records WHERE memory_id = ?1 AND record = ?2");
    delr.bind(1, row.id).bind(2, record).run();
    im.delete_evicted(row.id, before, mem, in_memory);
    AuditEntry& e = fr.entry;
    im.fill_entry(e, "forget", name, record, rec.size(), before, after);
    e.certificate = fr.certificate.to_json().dump();
    im.log_and_commit(e, row.id, before, after, t, c, fr);
    return fr;
  });
  const auto k0 = std::chrono::steady_clock::now();
  impl_->checkpoint(&res.wal_truncated);
  res.checkpoint_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - k0).count();
  res.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

namespace {
void check_mode_change(bool suspend, bool currently_suspended, const std::string& name,
                       std::int64_t record) {
  if (suspend && currently_suspended) {
    throw InvalidArgument("record " + std::to_string(record) + " of memory '" + name +
                          "' is already suspended");
  }
  if (!suspend && !currently_suspended) {
    throw InvalidArgument("record " + std::to_string(record) + " of memory '" + name +
                          "' is not suspended");
  }
}
}  // namespace

OpResult Store::suspend_record(const std::string& name, std::int64_t record) {
  check_record(record);
  Impl& im = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  return im.mutate(name, [&](const MemoryRow& row, Cached& c, Transaction& t) {
    Memory& mem = *c.memory;
    const auto rr = im.read_record(row.id, record);
    if (!rr.exists) throw NotFound("memory '" + name + "' has no record " + std::to_string(record));
    check_mode_change(true, rr.suspended, name, record);
    std::vector<TokenId> ids;
    {
      Statement q(im.db.handle(),
                  "SELECT token_id FROM tokens WHERE memory_id = ?1 AND token_id BETWEEN ?2 AND ?3 "
                  "ORDER BY token_id");
      q.bind(1, row.id).bind(2, record_lo(record)).bind(3, record_hi(record));
      while (q.step()) ids.push_back(q.int64(0));
    }
    const State before = mem.state();
    OpResult res;
    const auto m0 = std::chrono::steady_clock::now();
    res.diagnostics = mem.remove_batch(ids);
    res.memory_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
    const State after = mem.state();
    Statement up(im.db.handle(),
                 "UPDATE records SET suspended = 1 WHERE memory_id = ?1 AND record = ?2");
    up.bind(1, row.id).bind(2, record).run();
    im.delete_evicted(row.id, before, mem, ids);
    AuditEntry& e = res.entry;
    im.fill_entry(e, "suspend", name, record, static_cast<std::int64_t>(ids.size()), before, after);
    nlohmann::json cert{{"operation", "suspend"},
                        {"record", record},
                        {"tokens_excluded", ids.size()},
                        {"data_kept", true}};
    add_outcome_fields(cert, mem, after, res.diagnostics);
    e.certificate = cert.dump();
    im.log_and_commit(e, row.id, before, after, t, c, res);
    res.total_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
  });
}

OpResult Store::resume_record(const std::string& name, std::int64_t record) {
  check_record(record);
  Impl& im = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  return im.mutate(name, [&](const MemoryRow& row, Cached& c, Transaction& t) {
    Memory& mem = *c.memory;
    const auto rr = im.read_record(row.id, record);
    if (!rr.exists) throw NotFound("memory '" + name + "' has no record " + std::to_string(record));
    check_mode_change(false, rr.suspended, name, record);
    const TokenSet ts = im.record_tokens(row, record);
    const State before = mem.state();
    OpResult res;
    const auto m0 = std::chrono::steady_clock::now();
    res.diagnostics = mem.add_batch(ts);
    res.memory_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
    const State after = mem.state();
    Statement up(im.db.handle(),
                 "UPDATE records SET suspended = 0 WHERE memory_id = ?1 AND record = ?2");
    up.bind(1, row.id).bind(2, record).run();
    // Bounded mode: resumed tokens evicted on arrival and older evicted tokens leave the file.
    std::int64_t evicted = im.delete_evicted(row.id, before, mem, {});
    Statement del(im.db.handle(), "DELETE FROM tokens WHERE memory_id = ?1 AND token_id = ?2");
    for (TokenId id : ts.ids) {
      if (mem.contains(id)) continue;
      del.bind(1, row.id).bind(2, static_cast<std::int64_t>(id)).run();
      del.reset();
      ++evicted;
    }
    AuditEntry& e = res.entry;
    im.fill_entry(e, "resume", name, record, ts.size(), before, after);
    nlohmann::json cert{
        {"operation", "resume"},
        {"record", record},
        {"tokens_restored", ts.size()},
    };
    add_outcome_fields(cert, mem, after, res.diagnostics);
    if (row.settings.mode == MemoryMode::kBounded) cert["evicted"] = evicted;
    e.certificate = cert.dump();
    im.log_and_commit(e, row.id, before, after, t, c, res);
    res.total_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
  });
}

// Queries read the stored support instead of restoring the memory (docs/store.md "Cost"): the
// active tokens are read (O(n d)), the stored state's canonical hash is recomputed from them and
// compared with the hash the audit chain holds, and the readout runs on the support. A state that
// fails the check is never used: the query falls back to restoring (which re-derives and reports).
const StoredSupport& Store::Impl::stored_support(const std::string& name) {
  const MemoryRow row = read_memory_row(name);
  auto cached = cache.find(name);
  if (cached != cache.end() && cached->second.id == row.id &&
      cached->second.seq == row.last_audit_seq) {
    const Memory& m = *cached->second.memory;
    supports[name] = StoredSupport{row.id,
                                   row.last_audit_seq,
                                   row.dim,
                                   row.value_dim,
                                   row.settings.problem.kernel,
                                   m.state().b,
                                   support_of(m.state(), m.tokens())};
    return supports[name];
  }
  auto it = supports.find(name);
  if (it != supports.end() && it->second.id == row.id && it->second.seq == row.last_audit_seq) {
    return it->second;
  }
  const TokenSet tokens = load_active_tokens(row);
  const State state = load_state(row, tokens.ids);
  std::vector<int> order(tokens.ids.size());
  for (std::size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int>(t);
  const bool hash_ok = sha256_hex(canonical_bytes(row.settings.problem, tokens, order, state.alpha,
                                                  state.b)) == row.state_sha256;
  if (!hash_ok) {
    std::fprintf(stderr,
                 "svattn: warning: memory '%s': the stored state does not hash to its recorded "
                 "hash; re-deriving it from the tokens\n",
                 name.c_str());
    const Memory& m = *ensure_loaded(row).memory;  // throws FormatError when it cannot be trusted
    supports[name] = StoredSupport{row.id,
                                   row.last_audit_seq,
                                   row.dim,
                                   row.value_dim,
                                   row.settings.problem.kernel,
                                   m.state().b,
                                   support_of(m.state(), m.tokens())};
    return supports[name];
  }
  supports[name] = StoredSupport{
      row.id,  row.last_audit_seq,       row.dim, row.value_dim, row.settings.problem.kernel,
      state.b, support_of(state, tokens)};
  return supports[name];
}

namespace {
void check_query_dim(const std::string& name, const StoredSupport& s, const RowMatrix& q) {
  if (q.cols() != s.dim) {
    throw InvalidArgument("dimension mismatch: memory '" + name + "' has key dimension " +
                          std::to_string(s.dim) + ", the queries have " + std::to_string(q.cols()) +
                          " columns");
  }
}
}  // namespace

RowMatrix Store::query(const std::string& name, const RowMatrix& queries) {
  Impl& im = *impl_;
  const StoredSupport& s = *im.read([&] { return &im.stored_support(name); });
  check_query_dim(name, s, queries);
  RowMatrix out(queries.rows(), s.value_dim);
  for (Eigen::Index i = 0; i < queries.rows(); ++i) {
    const Eigen::VectorXd q = queries.row(i).transpose();
    out.row(i) = readout(s.kernel, s.support, q).transpose();  // NaN for the empty memory
  }
  return out;
}

std::vector<double> Store::decision(const std::string& name, const RowMatrix& queries) {
  Impl& im = *impl_;
  const StoredSupport& s = *im.read([&] { return &im.stored_support(name); });
  check_query_dim(name, s, queries);
  std::vector<double> out;
  for (Eigen::Index i = 0; i < queries.rows(); ++i) {
    const Eigen::VectorXd q = queries.row(i).transpose();
    out.push_back(decision_function(s.kernel, s.support, s.b, q));
  }
  return out;
}

std::vector<AuditEntry> Store::audit() const {
  Impl& im = *impl_;
  return im.read([&] { return im.read_audit(); });
}

std::vector<AuditEntry> Store::Impl::read_audit() {
  Impl& im = *this;
  {
    std::vector<AuditEntry> out;
    Statement q(im.db.handle(),
                "SELECT seq, time_utc, operation, memory, record, token_count, state_before, "
                "state_after, certificate, prev_hash, entry_hash FROM audit ORDER BY seq");
    while (q.step()) {
      AuditEntry e;
      e.seq = q.int64(0);
      e.time_utc = q.text(1);
      e.operation = q.text(2);
      e.memory = q.text(3);
      e.record = q.int64(4);
      e.token_count = q.int64(5);
      e.state_before = q.text(6);
      e.state_after = q.text(7);
      e.certificate = q.text(8);
      e.prev_hash = q.text(9);
      e.entry_hash = q.text(10);
      out.push_back(std::move(e));
    }
    return out;
  }
}

StoreVerification Store::verify() const {
  Impl& im = *impl_;
  StoreVerification v;
  im.read([&] {
    if (!im.tables_present(v.problems)) return 0;             // nothing further can be read
    const std::vector<AuditEntry> entries = im.read_audit();  // same snapshot as the memories
    // 1. SQLite structure.
    {
      Statement q(im.db.handle(), "PRAGMA integrity_check");
      std::string first;
      if (q.step()) first = q.text(0);
      v.integrity_ok = first == "ok";
      if (!v.integrity_ok) v.problems.push_back("integrity_check: " + first);
    }
    for (const char* trig : {"audit_no_update", "audit_no_delete"}) {
      Statement q(im.db.handle(),
                  "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?1");
      q.bind(1, std::string(trig));
      if (!q.step())
        v.problems.push_back(std::string("audit protection trigger '") + trig + "' is missing");
    }
    // 2. The audit chain.
    const std::size_t problems_before_chain = v.problems.size();
    std::string prev = kZeroHash;
    std::int64_t expect_seq = 1;
    std::map<std::string, std::pair<std::string, std::int64_t>>
        last_state;  // memory -> (hash, seq)
    for (const AuditEntry& e : entries) {
      const std::string where = "audit entry " + std::to_string(e.seq);
      if (e.seq != expect_seq) {
        v.problems.push_back(where + ": expected sequence number " + std::to_string(expect_seq) +
                             " (a row was deleted, inserted or renumbered)");
      }
      if (e.prev_hash != prev) {
        v.problems.push_back(where +
                             ": prev_hash does not match the previous entry's hash "
                             "(rows edited, deleted or reordered)");
      }
      const std::string recomputed = sha256_hex(canonical_audit_bytes(e));
      if (recomputed != e.entry_hash) {
        v.problems.push_back(where + ": entry hash does not match its contents (row edited)");
      }
      auto it = last_state.find(e.memory);
      if (e.operation == "create") {
        if (it != last_state.end()) {
          v.problems.push_back(where + ": memory '" + e.memory + "' created twice");
        }
      } else if (it == last_state.end()) {
        v.problems.push_back(where + ": operation on memory '" + e.memory +
                             "' before its creation");
      } else if (it->second.first != e.state_before) {
        v.problems.push_back(where +
                             ": state_before does not continue the memory's previous "
                             "state_after");
      }
      last_state[e.memory] = {e.state_after, e.seq};
      prev = e.entry_hash;
      expect_seq = e.seq + 1;
    }
    v.audit_entries = static_cast<std::int64_t>(entries.size());
    v.audit_head = entries.empty() ? kZeroHash : entries.back().entry_hash;
    {
      std::string head_seq;
      std::string head_hash;
      Statement q(im.db.handle(), "SELECT key, value FROM meta WHERE key LIKE 'audit_head_%'");
      while (q.step()) {
        if (q.text(0) == "audit_head_seq") head_seq = q.text(1);
        if (q.text(0) == "audit_head_hash") head_hash = q.text(1);
      }
      const std::string have_seq = entries.empty() ? "0" : std::to_string(entries.back().seq);
      if (head_seq != have_seq || head_hash != v.audit_head) {
        v.problems.push_back("audit head anchor (meta) says entry " + head_seq + " " +
                             head_hash.substr(0, 16) + "…, the log ends at entry " + have_seq +
                             " " + v.audit_head.substr(0, 16) +
                             "… (entries deleted or appended outside the store)");
      }
    }
    v.chain_ok = v.problems.size() == problems_before_chain;
    // 3. Every memory: stored state vs batch re-solve of the stored tokens, and verify_state.
    for (const MemoryRow& row : im.all_memory_rows()) {
      const auto it = last_state.find(row.name);
      v.memories.push_back(im.verify_memory(row, it == last_state.end() ? nullptr : &it->second,
                                            entries, v.problems, v.notes));
    }
    im.check_orphans(v.problems);
    for (const auto& [mem_name, st] : last_state) {
      Statement q(im.db.handle(), "SELECT 1 FROM memories WHERE name = ?1");
      q.bind(1, mem_name);
      if (!q.step())
        v.problems.push_back("audit log mentions memory '" + mem_name + "' which is missing");
    }
    return 0;
  });
  return v;
}

}  // namespace svattn

namespace svattn {

bool Store::Impl::tables_present(std::vector<std::string>& problems) {
  bool all = true;
  for (const char* table : {"meta", "memories", "records", "tokens", "support", "audit"}) {
    Statement q(db.handle(), "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
    q.bind(1, std::string(table));
    if (!q.step()) {
      problems.push_back(std::string("table '") + table + "' is missing");
      all = false;
    }
  }
  return all;
}

void Store::Impl::check_orphans(std::vector<std::string>& problems) {
  for (const char* table : {"records", "tokens", "support"}) {
    const std::string sql = std::string("SELECT count(*) FROM ") + table +
                            " WHERE memory_id NOT IN (SELECT id FROM memories)";
    const std::int64_t n = db.query_int(sql);
    if (n != 0) {
      problems.push_back(std::to_string(n) + " row(s) of table '" + table +
                         "' belong to no memory (memories.id edited or rows inserted)");
    }
  }
}

namespace {

// Every stored field of the memories row against the re-derived state (issue 18 row 8).
void compare_fields(const MemoryRow& row, const State& derived, bool exact,
                    std::vector<std::string>& out) {
  const std::string m = "memory '" + row.name + "': stored ";
  auto bits = [&](const char* field, double stored, double want) {
    if (!same_bits(stored, want)) {
      out.push_back(m + field + " " + std::to_string(stored) + " differs from the re-derived " +
                    std::to_string(want));
    }
  };
  if (row.warmup != derived.warmup) out.push_back(m + "warmup differs from the re-derived state");
  if (!exact) return;  // non-unique optimum: only the hash chain and verify_state speak
  if (row.status != derived.status) {
    out.push_back(m + "status '" + to_string(row.status) + "' differs from the re-derived '" +
                  to_string(derived.status) + "'");
  }
  bits("b", row.b, derived.b);
  bits("kkt_max_violation", row.kkt.max_violation, derived.kkt.max_violation);
  bits("kkt_sum_error", row.kkt.sum_error, derived.kkt.sum_error);
  bits("kkt_box_violation", row.kkt.box_violation, derived.kkt.box_violation);
}

}  // namespace

MemoryVerification Store::Impl::verify_memory(
    const MemoryRow& row, const std::pair<std::string, std::int64_t>* last_audit,
    const std::vector<AuditEntry>& entries, std::vector<std::string>& problems,
    std::vector<std::string>& notes) {
  MemoryVerification mv;
  mv.name = row.name;
  mv.stored_sha256 = row.state_sha256;
  const std::size_t problems_before = problems.size();
  const TokenSet tokens = load_active_tokens(row);
  mv.tokens = tokens.size();
  {
    Statement q(db.handle(),
                "SELECT count(*) FROM tokens WHERE memory_id = ?1 AND (record != (token_id >> "
                "23) OR position != (token_id & 8388607) OR record NOT IN (SELECT record FROM "
                "records WHERE memory_id = ?1))");
    q.bind(1, row.id);
    q.step();
    if (q.int64(0) != 0) {
      problems.push_back("memory '" + row.name + "': " + std::to_string(q.int64(0)) +
                         " token rows with inconsistent record/position/id");
    }
  }
  for (const AuditEntry& e : entries) {
    if (e.operation == "create" && e.memory == row.name) {
      Statement q(db.handle(), "SELECT created_utc FROM memories WHERE id = ?1");
      q.bind(1, row.id);
      if (q.step() && q.text(0) != e.time_utc) {
        problems.push_back("memory '" + row.name + "': stored created_utc '" + q.text(0) +
                           "' is not the time of its create entry '" + e.time_utc + "'");
      }
      break;
    }
  }
  State stored;
  try {
    stored = load_state(row, tokens.ids);
  } catch (const FormatError& e) {
    problems.push_back(e.what());  // load_state names the memory
    return mv;
  }
  BatchSettings bs;
  bs.problem = row.settings.problem;
  bs.tolerances = row.settings.tolerances;
  const BatchResult br = solve_batch(tokens, bs);
  mv.resolved_sha256 = br.state.state_sha256;
  mv.resolve_equal = br.state.state_sha256 == row.state_sha256;
  mv.report = verify_state(tokens, stored, row.settings.tolerances, false);
  mv.audit_consistent = last_audit != nullptr && last_audit->first == row.state_sha256 &&
                        last_audit->second == row.last_audit_seq;
  // Ridge 0 with duplicate keys: a verified-optimal stored state may differ from the re-solve's
  // equally optimal one. That is "uniqueness not established", not tampering (issue 18 row 7).
  mv.uniqueness_not_established = !mv.resolve_equal && mv.report.ok() && !mv.report.unique;
  if (mv.uniqueness_not_established) {
    notes.push_back("memory '" + row.name + "': uniqueness not established (" +
                    mv.report.uniqueness_reason +
                    "): the stored state is verified optimal but differs from the re-solve " +
                    br.state.state_sha256.substr(0, 16) + "…, which is equally optimal");
  } else if (!mv.resolve_equal) {
    problems.push_back("memory '" + row.name + "': stored state " + row.state_sha256.substr(0, 16) +
                       "… differs from the batch re-solve " + br.state.state_sha256.substr(0, 16) +
                       "… of its stored tokens");
  }
  if (!mv.report.ok()) {
    problems.push_back("memory '" + row.name + "': verify_state failed (feasible " +
                       std::to_string(mv.report.feasible) + ", kkt " +
                       std::to_string(mv.report.kkt_ok) + ", hash " +
                       std::to_string(mv.report.hash_ok) + ")");
  }
  if (!mv.audit_consistent) {
    problems.push_back("memory '" + row.name +
                       "': stored state is not the last state recorded in the audit log");
  }
  compare_fields(row, br.state, mv.resolve_equal, problems);
  mv.fields_ok = problems.size() == problems_before;
  return mv;
}

}  // namespace svattn

// ============================================================================== bulk import

namespace svattn {
namespace {

struct ImportPlan {
  std::vector<std::int64_t> records;            // ascending, distinct
  std::vector<std::vector<Eigen::Index>> rows;  // input rows of each record, in input order
};

ImportPlan plan_import(const std::vector<std::int64_t>& record_of_row, const RowMatrix& keys,
                       const RowMatrix& values, int dim, int value_dim) {
  if (static_cast<Eigen::Index>(record_of_row.size()) != keys.rows()) {
    throw InvalidArgument("import: " + std::to_string(record_of_row.size()) + " record ids for " +
                          std::to_string(keys.rows()) + " key rows");
  }
  if (keys.cols() != dim || values.cols() != value_dim || values.rows() != keys.rows()) {
    throw InvalidArgument(
        "import: dimension mismatch: the memory has key/value dimension " + std::to_string(dim) +
        "/" + std::to_string(value_dim) + ", the input has " + std::to_string(keys.cols()) + "/" +
        std::to_string(values.cols()) + " columns and " + std::to_string(keys.rows()) + "/" +
        std::to_string(values.rows()) + " rows");
  }
  std::map<std::int64_t, std::vector<Eigen::Index>> by_record;
  for (std::size_t i = 0; i < record_of_row.size(); ++i) {
    const std::int64_t r = record_of_row[i];
    if (r < 0 || r > kMaxRecordId) {
      throw InvalidArgument("import: row " + std::to_string(i) + ": record id " +
                            std::to_string(r) + " out of range [0, 2^40)");
    }
    auto& v = by_record[r];
    if (static_cast<std::int64_t>(v.size()) > kMaxPosition) {
      throw InvalidArgument("import: row " + std::to_string(i) + ": record " + std::to_string(r) +
                            " has more than 2^23 rows");
    }
    v.push_back(static_cast<Eigen::Index>(i));
  }
  ImportPlan p;
  for (auto& [r, v] : by_record) {
    p.records.push_back(r);
    p.rows.push_back(std::move(v));
  }
  return p;
}

TokenSet record_set(std::int64_t record, const std::vector<Eigen::Index>& rows,
                    const RowMatrix& keys, const RowMatrix& values) {
  TokenSet ts;
  ts.keys.resize(static_cast<Eigen::Index>(rows.size()), keys.cols());
  ts.values.resize(static_cast<Eigen::Index>(rows.size()), values.cols());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ts.ids.push_back(store_token_id(record, static_cast<std::int64_t>(i)));
    ts.keys.row(static_cast<Eigen::Index>(i)) = keys.row(rows[i]);
    ts.values.row(static_cast<Eigen::Index>(i)) = values.row(rows[i]);
  }
  return ts;
}

bool same_tokens(const TokenSet& a, const TokenSet& b) {
  auto bytes_equal = [](const RowMatrix& x, const RowMatrix& y) {
    return x.rows() == y.rows() && x.cols() == y.cols() &&
           std::memcmp(x.data(), y.data(), sizeof(double) * static_cast<std::size_t>(x.size())) ==
               0;
  };
  return a.ids == b.ids && bytes_equal(a.keys, b.keys) && bytes_equal(a.values, b.values);
}

TokenSet concat(const std::vector<TokenSet>& parts, int dim, int value_dim) {
  Eigen::Index n = 0;
  for (const TokenSet& p : parts) n += p.size();
  TokenSet ts;
  ts.keys.resize(n, dim);
  ts.values.resize(n, value_dim);
  Eigen::Index at = 0;
  for (const TokenSet& p : parts) {
    ts.ids.insert(ts.ids.end(), p.ids.begin(), p.ids.end());
    ts.keys.middleRows(at, p.size()) = p.keys;
    ts.values.middleRows(at, p.size()) = p.values;
    at += p.size();
  }
  return ts;
}

}  // namespace

ImportResult Store::import_records(const std::string& name,
                                   const std::vector<std::int64_t>& record_of_row,
                                   const RowMatrix& keys, const RowMatrix* values,
                                   const ImportOptions& options) {
  if (options.chunk_records < 1) {
    throw InvalidArgument("import: chunk_records must be >= 1, got " +
                          std::to_string(options.chunk_records));
  }
  Impl& im = *impl_;
  im.require_writable();
  const auto t0 = std::chrono::steady_clock::now();
  const RowMatrix& vals = values != nullptr ? *values : keys;
  const MemoryRow row0 = im.read([&] { return im.read_memory_row(name); });
  const ImportPlan plan = plan_import(record_of_row, keys, vals, row0.dim, row0.value_dim);
  // Which records are already there (resume) -- all checked before the first write.
  std::vector<char> skip(plan.records.size(), 0);
  im.read([&] {
    for (std::size_t k = 0; k < plan.records.size(); ++k) {
      if (!im.read_record(row0.id, plan.records[k]).exists) continue;
      const TokenSet want = record_set(plan.records[k], plan.rows[k], keys, vals);
      if (!same_tokens(im.record_tokens(row0, plan.records[k]), want)) {
        throw AlreadyExists("import: memory '" + name + "' already has record " +
                            std::to_string(plan.records[k]) + " with other tokens (input row " +
                            std::to_string(plan.rows[k].front()) + ")");
      }
      skip[k] = 1;
    }
    return 0;
  });
  ImportResult res;
  res.totals.records_total = static_cast<std::int64_t>(plan.records.size());
  for (char c : skip) res.totals.records_skipped += c;
  std::size_t k = 0;
  while (k < plan.records.size()) {
    std::vector<std::size_t> chunk;
    for (;
         k < plan.records.size() && static_cast<std::int64_t>(chunk.size()) < options.chunk_records;
         ++k) {
      if (skip[k] == 0) chunk.push_back(k);
    }
    if (chunk.empty()) continue;
    res.entries.push_back(im.import_chunk(name, plan, chunk, keys, vals, res.totals));
    ++res.chunks;
    res.totals.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (options.progress) options.progress(res.totals);
  }
  res.state_sha256 = im.read([&] { return im.read_memory_row(name).state_sha256; });
  return res;
}

AuditEntry Store::Impl::import_chunk(const std::string& name, const ImportPlan& plan,
                                     const std::vector<std::size_t>& chunk, const RowMatrix& keys,
                                     const RowMatrix& vals, ImportProgress& totals) {
  return mutate(name, [&](const MemoryRow& row, Cached& c, Transaction& t) {
    Memory& mem = *c.memory;
    std::vector<TokenSet> parts;
    std::vector<std::int64_t> ids;
    for (std::size_t k : chunk) {
      if (read_record(row.id, plan.records[k]).exists) {  // another process added it meanwhile
        throw AlreadyExists("import: memory '" + name + "' already has record " +
                            std::to_string(plan.records[k]));
      }
      parts.push_back(record_set(plan.records[k], plan.rows[k], keys, vals));
      ids.push_back(plan.records[k]);
    }
    const TokenSet ts = concat(parts, row.dim, row.value_dim);
    ts.validate();
    const State before = mem.state();
    OpResult res;
    res.diagnostics = mem.add_batch(ts);
    const State after = mem.state();
    Statement rec(db.handle(),
                  "INSERT INTO records(memory_id, record, suspended, added_utc) VALUES (?1, ?2, 0, "
                  "?3)");
    const std::string now = now_utc();
    for (std::int64_t r : ids) {
      rec.bind(1, row.id).bind(2, r).bind(3, now).run();
      rec.reset();
    }
    insert_tokens(row.id, ts, mem);
    delete_evicted(row.id, before, mem, {});
    AuditEntry& e = res.entry;
    fill_entry(e, "import", name, ids.front(), ts.size(), before, after);
    nlohmann::json cert{{"operation", "import"},
                        {"records", ids.size()},
                        {"first_record", ids.front()},
                        {"last_record", ids.back()},
                        {"tokens", ts.size()}};
    add_outcome_fields(cert, mem, after, res.diagnostics);
    e.certificate = cert.dump();
    log_and_commit(e, row.id, before, after, t, c, res);
    totals.records_done += static_cast<std::int64_t>(ids.size());
    totals.tokens_done += ts.size();
    return e;
  });
}

}  // namespace svattn
