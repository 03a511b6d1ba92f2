// `export_memory`: a memory's remaining tokens, stored state, settings and a manifest, written as
// .npy and JSON files that numpy and any JSON reader open, for the independent verifier
// (tools/svattn_verify; docs/audit.md "Export").
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/store_evidence.h"
#include "utc_clock.h"

namespace svattn {
namespace {

namespace fs = std::filesystem;

// One .npy file (version 1.0, C order, little-endian) from its raw element bytes.
std::string npy_bytes(const std::string& descr, const std::vector<std::size_t>& shape,
                      const std::string& data) {
  std::string dims;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    dims += std::to_string(shape[k]) + (shape.size() == 1 || k + 1 < shape.size() ? "," : "");
    if (k + 1 < shape.size()) dims += " ";
  }
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  return out + header + data;
}

template <class T>
void append_le(std::string& out, T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86-64 and aarch64 are little-endian (io.cpp assumes it too)
  out.append(reinterpret_cast<const char*>(b), sizeof(T));
}

std::string matrix_data(const RowMatrix& m) {
  std::string out;
  out.reserve(static_cast<std::size_t>(m.size()) * 8);
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) append_le(out, m(r, c));
  return out;
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.flush();
  if (!f) throw IoError("export: cannot write '" + p.string() + "'");
}

std::string sha_of(const std::string& bytes) {
  return sha256_hex(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

// The directory must not exist or be empty; the files go to a fresh sibling first.
fs::path prepare_target(const std::string& out_dir) {
  if (out_dir.empty()) throw InvalidArgument("--out: empty directory name");
  const fs::path target(out_dir);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(target, ec))) {
    if (!fs::is_directory(fs::symlink_status(target))) {
      throw AlreadyExists("--out: '" + out_dir + "' exists and is not a directory");
    }
    if (!fs::is_empty(target)) {
      throw AlreadyExists("--out: directory '" + out_dir + "' is not empty");
    }
  }
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) {
    throw IoError("--out: parent directory of '" + out_dir + "' does not exist");
  }
  std::random_device rd;
  const fs::path tmp =
      parent / (".svattn-export-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  if (!fs::create_directory(tmp, ec) || ec) {
    throw IoError("--out: cannot create a directory beside '" + out_dir + "': " + ec.message());
  }
  return tmp;
}

struct ExportFiles {
  nlohmann::json listing = nlohmann::json::array();
  std::vector<std::string> names;
  void add(const fs::path& dir, const std::string& name, const std::string& bytes,
           const std::string& what) {
    write_bytes(dir / name, bytes);
    listing.push_back(
        {{"name", name}, {"bytes", bytes.size()}, {"sha256", sha_of(bytes)}, {"content", what}});
    names.push_back(name);
  }
};

// ids, keys, values, alpha and the partition (0 reserve, 1 margin, 2 error), aligned by row.
void write_arrays(const fs::path& dir, const TokenSet& t, const State& s, ExportFiles& files) {
  const std::size_t n = s.ids.size();
  std::string ids;
  std::string alpha;
  std::string parts;
  std::size_t im = 0;
  std::size_t ie = 0;
  for (std::size_t i = 0; i < n; ++i) {
    append_le(ids, static_cast<std::int64_t>(s.ids[i]));
    append_le(alpha, s.alpha[i]);
    std::int8_t part = 0;
    if (im < s.partition.margin.size() && s.partition.margin[im] == s.ids[i]) {
      part = 1;
      ++im;
    } else if (ie < s.partition.error.size() && s.partition.error[ie] == s.ids[i]) {
      part = 2;
      ++ie;
    }
    parts += static_cast<char>(part);
  }
  files.add(dir, "ids.npy", npy_bytes("<i8", {n}, ids), "token ids, ascending (int64)");
  files.add(dir, "keys.npy",
            npy_bytes("<f8", {n, static_cast<std::size_t>(s.dim)}, matrix_data(t.keys)),
            "keys x_i, one row per id (float64)");
  files.add(dir, "values.npy",
            npy_bytes("<f8", {n, static_cast<std::size_t>(s.value_dim)}, matrix_data(t.values)),
            "values v_i, one row per id (float64)");
  files.add(dir, "alpha.npy", npy_bytes("<f8", {n}, alpha), "stored coefficients alpha_i");
  files.add(dir, "partition.npy", npy_bytes("|i1", {n}, parts),
            "stored partition: 0 reserve, 1 margin, 2 error");
}

nlohmann::json state_json(const State& s) {
  return {{"b", s.b},
          {"state_sha256", s.state_sha256},
          {"status", to_string(s.status)},
          {"warmup", s.warmup},
          {"n", s.ids.size()},
          {"margin", s.partition.margin.size()},
          {"error", s.partition.error.size()},
          {"reserve", s.partition.reserve.size()},
          {"kkt",
           {{"max_violation", s.kkt.max_violation},
            {"sum_error", s.kkt.sum_error},
            {"box_violation", s.kkt.box_violation}}}};
}

nlohmann::json settings_json(const MemorySettings& settings, const State& s) {
  nlohmann::json j = memory_settings_to_json(settings);
  j["dim"] = s.dim;
  j["value_dim"] = s.value_dim;
  return j;
}

// The state as the file stores it, not re-derived: a store whose coefficients, b or hash were
// altered is exported as it is, for the verifier to find (docs/audit.md "Export"). A read-only
// copy with shredded records has no stored state for the remaining tokens: the memory's state
// without them, as every other read command reports it.
State exported_state(Store& store, const std::string& memory, const MemoryInfo& info,
                     const Memory& mem) {
  return info.shredded_records > 0 ? mem.state() : store.stored_state(memory);
}

nlohmann::json manifest_json(const std::string& memory, const MemoryInfo& info, const State& s,
                             Store& store, const ExportFiles& files) {
  const std::vector<AuditEntry> audit = store.audit();
  nlohmann::json records = nlohmann::json::array();
  for (const RecordInfo& r : store.records(memory)) {
    if (r.suspended || r.shredded) continue;
    records.push_back({{"record", r.record}, {"tokens", r.tokens}});
  }
  return {{"format", "svattn-export-v1"},
          {"store", store.path()},  // a PostgreSQL URI without its password
          {"memory", memory},
          {"exported_utc", store_detail::now_utc()},
          {"mode", to_string(info.settings.mode)},
          {"n", s.ids.size()},
          {"dim", s.dim},
          {"value_dim", s.value_dim},
          {"state_sha256", s.state_sha256},
          {"last_audit_seq", info.last_audit_seq},
          {"audit_head_seq", audit.empty() ? 0 : audit.back().seq},
          {"audit_head_hash", audit.empty() ? std::string(64, '0') : audit.back().entry_hash},
          {"records", records},
          {"token_id_layout", "id = record << 23 | position"},
          {"math", "docs/math.md sections 1-3 (problem, KKT), 6 (state hash), 7 (verifier)"},
          {"files", files.listing}};
}

}  // namespace

MemoryExport export_memory(const std::string& store_path, const StoreOptions& options,
                           const std::string& memory, const std::string& out_dir) {
  StoreOptions o = options;
  o.read_only = true;
  o.create = false;
  Store store(store_path, o);
  const MemoryInfo info = store.memory_info(memory);  // NotFound before anything is written
  const Memory& mem = store.memory(memory);
  const TokenSet tokens = mem.tokens();
  const State s = exported_state(store, memory, info, mem);
  if (tokens.ids != s.ids) {
    throw FormatError("export: memory '" + memory + "': token ids differ from the state's ids");
  }
  const fs::path tmp = prepare_target(out_dir);
  try {
    ExportFiles files;
    write_arrays(tmp, tokens, s, files);
    files.add(tmp, "state.json", state_json(s).dump(2) + "\n", "b, hash, status, sizes");
    files.add(tmp, "settings.json", settings_json(info.settings, s).dump(2) + "\n",
              "memory settings, dim, value_dim");
    const nlohmann::json manifest = manifest_json(memory, info, s, store, files);
    write_bytes(tmp / "manifest.json", manifest.dump(2) + "\n");
    files.names.push_back("manifest.json");
    std::error_code ec;
    fs::remove(out_dir, ec);  // an empty directory (checked above); absent is fine
    fs::rename(tmp, out_dir);
    MemoryExport r;
    r.directory = out_dir;
    r.memory = memory;
    r.tokens = static_cast<std::int64_t>(s.ids.size());
    r.records = static_cast<std::int64_t>(manifest["records"].size());
    r.state_sha256 = s.state_sha256;
    r.files = files.names;
    return r;
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace svattn
