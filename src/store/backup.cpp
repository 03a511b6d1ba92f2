// Online copy of an SQLite data file through sqlite3_backup_init/step/finish, written to a
// temporary file and linked into place without overwriting (docs/store.md "Encryption at rest
// (building blocks)").
#include "backup.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "db/pg_uri.h"
#include "db/sqlite.h"
#include "svattn/errors.h"
#include "svattn/store.h"
#include "support/clock.h"

namespace svattn::store_detail {
namespace {

bool path_exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

std::string parent_dir(const std::string& p) {
  const auto slash = p.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

void fsync_path(const std::string& p, int flags) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw IoError("backup: cannot open '" + p + "' to sync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw IoError("backup: fsync of '" + p + "' failed: " + std::strerror(err));
}

// SHA-256 of a file, streamed (a backup can be far larger than memory should hold twice).
std::string file_sha256(const std::string& p, std::int64_t& bytes) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("backup: cannot read '" + p + "': " + std::strerror(errno));
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  bool ok = md != nullptr && EVP_DigestInit_ex(md, EVP_sha256(), nullptr) == 1;
  std::vector<std::uint8_t> buf(1 << 20);
  bytes = 0;
  ssize_t got = 0;
  while (ok && (got = ::read(fd, buf.data(), buf.size())) > 0) {
    ok = EVP_DigestUpdate(md, buf.data(), static_cast<std::size_t>(got)) == 1;
    bytes += got;
  }
  ::close(fd);
  unsigned char h[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  ok = ok && got == 0 && EVP_DigestFinal_ex(md, h, &n) == 1;
  EVP_MD_CTX_free(md);
  if (!ok) throw IoError("backup: cannot hash '" + p + "'");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(kHex[h[i] >> 4]);
    out.push_back(kHex[h[i] & 15]);
  }
  return out;
}

// A temporary file beside `dest` that is removed unless released.
class TempFile {
 public:
  explicit TempFile(const std::string& dest) {
    std::string tmpl = dest + ".partial-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    const int fd = ::mkstemp(buf.data());
    if (fd < 0) {
      throw IoError("backup: cannot create a file beside '" + dest + "': " + std::strerror(errno));
    }
    ::close(fd);
    path_ = buf.data();
  }
  ~TempFile() {
    ::unlink(path_.c_str());
    for (const char* suffix : {"-journal", "-wal", "-shm"}) ::unlink((path_ + suffix).c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

void BackupSettings::validate() const {
  if (pages_per_step == 0 || pages_per_step < -1) {
    throw InvalidArgument("BackupSettings.pages_per_step must be -1 or > 0, got " +
                          std::to_string(pages_per_step));
  }
  if (busy_timeout_ms < 0) {
    throw InvalidArgument("BackupSettings.busy_timeout_ms must be >= 0, got " +
                          std::to_string(busy_timeout_ms));
  }
}

nlohmann::json BackupResult::to_json() const {
  return {{"source", source},
          {"destination", destination},
          {"pages", pages},
          {"page_size", page_size},
          {"bytes", bytes},
          {"sha256", sha256},
          {"steps", steps},
          {"integrity_ok", integrity_ok},
          {"keys_included", keys_included},
          {"keys_note", keys_note},
          {"seconds", seconds}};
}

BackupResult backup_database(const std::string& source, const std::string& destination,
                             const BackupSettings& settings) {
  settings.validate();
  const support::Stopwatch watch;
  if (!path_exists(source)) throw NotFound("backup: source '" + source + "' does not exist");
  if (path_exists(destination)) {
    throw AlreadyExists("backup: destination '" + destination +
                        "' exists; a backup never overwrites (choose a new path)");
  }
  BackupResult r;
  r.source = source;
  r.destination = destination;
  TempFile tmp(destination);
  {
    SqliteOpen from;
    from.read_only = from.full_mutex = true;
    from.busy_timeout_ms = settings.busy_timeout_ms;
    Database src = open_sqlite(source, from);
    SqliteOpen to;
    to.full_mutex = true;
    Database dst = open_sqlite(tmp.path(), to);
    r.steps =
        sqlite_backup(src, dst, settings.pages_per_step, settings.busy_timeout_ms, source);
    const SqlitePages pages = sqlite_pages(dst);
    r.pages = pages.count;
    r.page_size = pages.size;
    r.integrity_ok = dst.integrity_check(true) == "ok";
  }
  fsync_path(tmp.path(), O_RDONLY);
  if (::link(tmp.path().c_str(), destination.c_str()) != 0) {
    if (errno == EEXIST) {
      throw AlreadyExists("backup: destination '" + destination +
                          "' appeared during the backup; it was not overwritten");
    }
    throw IoError("backup: cannot create '" + destination + "': " + std::strerror(errno));
  }
  fsync_path(parent_dir(destination), O_RDONLY | O_DIRECTORY);
  r.sha256 = file_sha256(destination, r.bytes);
  r.keys_note = "data keys are not included: they stay in the key store beside the source (" +
                source + ".keys); records in this copy are readable only with that key store, " +
                "and a record whose key is destroyed later stays unreadable in the copy";
  r.seconds = watch.seconds();
  return r;
}

}  // namespace svattn::store_detail

namespace svattn {

nlohmann::json backup_to_json(const StoreBackup& b) {
  return {{"source", b.source},         {"destination", b.destination},
          {"encryption", b.encryption}, {"bytes", b.bytes},
          {"sha256", b.sha256},         {"integrity_ok", b.integrity_ok},
          {"keys_included", b.keys_included}, {"note", b.note},
          {"seconds", b.seconds}};
}

StoreBackup backup_store(const std::string& store_path, const std::string& destination) {
  if (store_detail::is_postgres_uri(store_path)) {
    throw InvalidArgument("backup: '" + store_detail::parse_postgres_uri(store_path).display +
                          "' is a PostgreSQL store: back it up with the server's tools (pg_dump); "
                          "its key store file is not in the database (docs/store.md "
                          "\"PostgreSQL\")");
  }
  StoreBackup out;
  {
    StoreOptions o;  // opened read-only first: the file must be a store, and its encryption known
    o.read_only = true;
    const Store store(store_path, o);
    out.encryption = store.encryption();
  }
  const store_detail::BackupResult r = store_detail::backup_database(store_path, destination);
  out.source = r.source;
  out.destination = r.destination;
  out.bytes = r.bytes;
  out.sha256 = r.sha256;
  out.integrity_ok = r.integrity_ok;
  out.keys_included = r.keys_included;
  out.seconds = r.seconds;
  out.note = out.encryption == "none"
                 ? "plaintext store: the copy holds every record's key and value bytes; erasing a "
                   "record later does not remove it from this copy"
                 : r.keys_note;
  return out;
}

}  // namespace svattn
