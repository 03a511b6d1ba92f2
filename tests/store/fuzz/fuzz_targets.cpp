// The fuzz targets and their seeds (see fuzz_targets.h).
#include "fuzz_targets.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "svattn/errors.h"
#include "svattn/io.h"
#include "svattn/memory.h"
#include "svattn/store.h"

namespace svattn::fuzz {
namespace {

// A private scratch file per process, removed with its side files (remove_store).
std::string scratch(const char* ext) {
  const char* base = std::getenv("TMPDIR");
  return std::string(base != nullptr ? base : "/tmp") + "/svattn_fuzz_" +
         std::to_string(::getpid()) + ext;
}

void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("fuzz: cannot write " + path);
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
}

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
}

// The store file and its key store (".keys"), each with SQLite's side files.
void remove_store(const std::string& p) {
  for (const std::string& f : {p, p + ".keys"})
    for (const char* s : {"", "-wal", "-shm", "-journal"}) std::remove((f + s).c_str());
}

int read_matrix_from(const std::uint8_t* data, std::size_t size, const char* ext) {
  const std::string p = scratch(ext);
  write_file(p, data, size);
  try {
    const RowMatrix m = read_matrix(p);
    (void)m.size();
  } catch (const Error&) {
  }
  std::remove(p.c_str());
  return 0;
}

RowMatrix small_keys() {
  RowMatrix k(6, 2);
  k << 0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, 0.8, -0.9, 1.0, 0.05, -0.15;
  return k;
}

}  // namespace

int csv_reader(const std::uint8_t* data, std::size_t size) {
  return read_matrix_from(data, size, ".csv");
}

int npy_reader(const std::uint8_t* data, std::size_t size) {
  return read_matrix_from(data, size, ".npy");
}

int memory_file(const std::uint8_t* data, std::size_t size) {
  try {
    const Memory m = Memory::deserialize(std::vector<std::uint8_t>(data, data + size));
    (void)m.state_sha256();
  } catch (const Error&) {
  }
  return 0;
}

int store_file(const std::uint8_t* data, std::size_t size) {
  const std::string p = scratch(".db");
  remove_store(p);
  write_file(p, data, size);
  try {
    StoreOptions o;
    o.busy_timeout_ms = 0;
    o.check_on_open = true;  // the opt-in quick_check is fuzzed too
    Store s(p, o);
    (void)s.verify();
    for (const std::string& name : s.memory_names()) {
      (void)s.records(name);
      (void)s.query(name, RowMatrix::Zero(1, s.memory_info(name).dim));
    }
  } catch (const Error&) {
  }
  remove_store(p);
  return 0;
}

std::vector<std::vector<std::uint8_t>> seeds(const std::string& target) {
  std::vector<std::vector<std::uint8_t>> out;
  auto text = [&](const std::string& s) { out.emplace_back(s.begin(), s.end()); };
  if (target == "csv") {
    text("1,2,3\n4,5,6\n");
    text("# comment\n1.5e-3, -2\n\n3,4\r\n");
    text("1,nan\n");
  } else if (target == "npy") {
    const std::string p = scratch(".npy");
    write_npy(p, small_keys());
    out.push_back(read_file(p));
    std::remove(p.c_str());
  } else if (target == "memory") {
    MemorySettings ms;
    ms.problem.C = 0.3;
    Memory m(ms, 2, 2);
    out.push_back(m.serialize());  // the empty memory
    m.add_batch(TokenSet::from_rows(small_keys()));
    out.push_back(m.serialize());
  } else if (target == "store") {
    const std::string p = scratch(".seed.db");
    remove_store(p);
    {
      StoreOptions o;
      o.create = true;
      Store s(p, o);
      MemorySettings ms;
      ms.problem.C = 0.3;
      s.create_memory("m", ms, 2, 2);
      s.add_record("m", 0, small_keys());
    }
    out.push_back(read_file(p));
    remove_store(p);
  }
  return out;
}

Target target_named(const std::string& name) {
  if (name == "csv") return &csv_reader;
  if (name == "npy") return &npy_reader;
  if (name == "memory") return &memory_file;
  if (name == "store") return &store_file;
  return nullptr;
}

}  // namespace svattn::fuzz
