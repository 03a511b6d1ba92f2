// What the evidence tests share (test_store_evidence.cpp, test_store_evidence_cli.cpp): .npy
// and JSON files of an export, the independent verifier's run, and the Evidence fixture (a store
// with one memory, its export and both verifiers).
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "cli/cli_test_util.h"
#include "store/store_test_util.h"
#ifdef SVATTN_TEST_POSTGRES
#include "store/pg_test_util.h"
#endif
#include "svattn/hash.h"
#include "svattn/io.h"
#include "svattn/store_evidence.h"

namespace svattn {
namespace {


namespace fs = std::filesystem;
using store_test::random_keys;
using store_test::rbf_settings;
using test::RunResult;
using test::TempDir;

const std::string kVerifierPath = std::string(SVATTN_SOURCE_DIR) + "/tools/svattn_verify";

// --------------------------------------------------------------------- reading and writing .npy

struct Npy {
  std::string descr;
  std::vector<std::size_t> shape;
  std::string data;
};

Npy read_npy(const std::string& path) {
  const std::string b = test::read_text(path);
  const std::size_t hlen =
      static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
  const std::string header = b.substr(10, hlen);
  Npy n;
  const auto d = header.find("'descr': '") + 10;
  n.descr = header.substr(d, header.find('\'', d) - d);
  std::string dims = header.substr(header.find('(') + 1);
  dims = dims.substr(0, dims.find(')'));
  std::size_t at = 0;
  while (at < dims.size()) {
    const std::size_t comma = dims.find(',', at);
    const std::string item =
        dims.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.find_first_of("0123456789") != std::string::npos) n.shape.push_back(std::stoull(item));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  n.data = b.substr(10 + hlen);
  return n;
}

void write_npy_raw(const std::string& path, const Npy& n) {
  std::string dims;
  for (std::size_t k = 0; k < n.shape.size(); ++k)
    dims += std::to_string(n.shape[k]) + (n.shape.size() == 1      ? ","
                                          : k + 1 < n.shape.size() ? ", "
                                                                   : "");
  std::string header =
      "{'descr': '" + n.descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  header.append((64 - (11 + header.size()) % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  std::ofstream(path, std::ios::binary) << out << header << n.data;
}

template <class T>
std::vector<T> npy_vector(const Npy& n) {
  std::vector<T> v(n.data.size() / sizeof(T));
  std::memcpy(v.data(), n.data.data(), v.size() * sizeof(T));
  return v;
}

template <class T>
std::string raw_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

nlohmann::json read_json(const std::string& p) { return nlohmann::json::parse(test::read_text(p)); }
void write_json_file(const std::string& p, const nlohmann::json& j) {
  std::ofstream(p, std::ios::binary) << j.dump(2);
}

// ------------------------------------------------------------------------------- an export in RAM

// The export read back into svattn's own types, for verify_state.
struct Loaded {
  TokenSet tokens;
  State state;
  std::vector<std::int8_t> part;
};

Loaded load_export(const std::string& dir) {
  Loaded l;
  const nlohmann::json settings = read_json(dir + "/settings.json");
  const nlohmann::json st = read_json(dir + "/state.json");
  l.state.settings = memory_settings_from_json(settings).problem;
  l.state.dim = settings.at("dim").get<int>();
  l.state.value_dim = settings.at("value_dim").get<int>();
  l.state.ids = npy_vector<std::int64_t>(read_npy(dir + "/ids.npy"));
  l.state.alpha = npy_vector<double>(read_npy(dir + "/alpha.npy"));
  l.part = npy_vector<std::int8_t>(read_npy(dir + "/partition.npy"));
  l.state.b = st.at("b").get<double>();
  l.state.state_sha256 = st.at("state_sha256").get<std::string>();
  l.state.status = status_from_string(st.at("status").get<std::string>());
  l.state.warmup = st.at("warmup").get<bool>();
  for (std::size_t t = 0; t < l.part.size(); ++t) {
    auto& set = l.part[t] == 1   ? l.state.partition.margin
                : l.part[t] == 2 ? l.state.partition.error
                                 : l.state.partition.reserve;
    set.push_back(l.state.ids[t]);
  }
  const std::size_t n = l.state.ids.size();
  l.tokens.ids = l.state.ids;
  const auto matrix = [&](const std::string& name, int cols) {
    const Npy m = read_npy(dir + "/" + name);
    RowMatrix out(static_cast<Eigen::Index>(n), cols);
    if (n > 0) std::memcpy(out.data(), m.data.data(), n * cols * sizeof(double));
    return out;
  };
  l.tokens.keys = matrix("keys.npy", l.state.dim);
  l.tokens.values = matrix("values.npy", l.state.value_dim);
  return l;
}

// Writes `l` back over the export in `dir` and rewrites the manifest's file hashes, so that only
// the mathematics can tell a tampered export from a genuine one.
void save_export(const std::string& dir, const Loaded& l, nlohmann::json st) {
  const std::size_t n = l.state.ids.size();
  write_npy_raw(dir + "/ids.npy", {"<i8", {n}, raw_of(l.state.ids)});
  write_npy_raw(dir + "/alpha.npy", {"<f8", {n}, raw_of(l.state.alpha)});
  write_npy_raw(dir + "/partition.npy", {"|i1", {n}, raw_of(l.part)});
  write_npy_raw(dir + "/keys.npy", {"<f8",
                                    {n, static_cast<std::size_t>(l.state.dim)},
                                    std::string(reinterpret_cast<const char*>(l.tokens.keys.data()),
                                                l.tokens.keys.size() * sizeof(double))});
  write_npy_raw(dir + "/values.npy",
                {"<f8",
                 {n, static_cast<std::size_t>(l.state.value_dim)},
                 std::string(reinterpret_cast<const char*>(l.tokens.values.data()),
                             l.tokens.values.size() * sizeof(double))});
  st["b"] = l.state.b;
  st["state_sha256"] = l.state.state_sha256;
  st["n"] = n;
  write_json_file(dir + "/state.json", st);
  nlohmann::json manifest = read_json(dir + "/manifest.json");
  manifest["n"] = n;
  manifest["state_sha256"] = l.state.state_sha256;
  for (auto& f : manifest["files"]) {
    f["sha256"] = store_test::file_sha(dir + "/" + f["name"].get<std::string>());
  }
  write_json_file(dir + "/manifest.json", manifest);
}

bool cpp_verifies(const std::string& dir) {
  const Loaded l = load_export(dir);
  const VerifyReport r = verify_state(l.tokens, l.state, Tolerances{}, false);
  return r.ok();
}

RunResult run_verifier(const std::string& dir, const TempDir& tmp, const std::string& cert = "") {
  std::vector<std::string> args{
      "PYTHONPATH=" + kVerifierPath, SVATTN_PYTHON, "-m", "svattn_verify", dir, "--json"};
  if (!cert.empty()) {
    args.push_back("--certificate");
    args.push_back(cert);
  }
  return test::run_binary("/usr/bin/env", args, tmp);
}

// The names of the checks the independent verifier failed ("" when it passed).
std::vector<std::string> failed_checks(const RunResult& r) {
  std::vector<std::string> out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded()) return {"(no JSON: " + r.err + ")"};
  for (const auto& c : j["checks"])
    if (!c["ok"].get<bool>() && c["result"] != "not established")
      out.push_back(c["name"].get<std::string>());
  return out;
}

// -------------------------------------------------------------------------------------- fixture

enum class Forget { kReserveOnly, kSupport, kAll, kNone };

class Evidence : public ::testing::Test {
 protected:
  TempDir tmp_{"evidence"};
  std::string store_ = tmp_.file("s.db");
  std::string cert_ = tmp_.file("cert.json");

  // Memory "m" with `records` records of `per` tokens (ids 0..records-1), added one by one or
  // imported in one call.
  void fill(const MemorySettings& ms, int records, int per, int d, bool import = false,
            bool plaintext = false) {
    StoreOptions o;
    o.create = true;
    o.encrypt = !plaintext;
    Store s(store_, o);
    s.create_memory("m", ms, d, d);
    const RowMatrix keys = random_keys(records * per, d, 7);
    if (import) {
      std::vector<std::int64_t> rec;
      for (int r = 0; r < records; ++r) rec.insert(rec.end(), per, r);
      s.import_records("m", rec, keys);
      return;
    }
    for (int r = 0; r < records; ++r) s.add_record("m", r, keys.middleRows(r * per, per));
  }

  // Forgets records of the kind asked for; writes the last certificate to cert_.
  ForgetResult forget(Forget kind) {
    Store s(store_);
    const State st = s.stored_state("m");
    std::map<std::int64_t, bool> support;  // record -> holds a nonzero coefficient
    for (std::size_t t = 0; t < st.ids.size(); ++t)
      support[record_of(st.ids[t])] = support[record_of(st.ids[t])] || st.alpha[t] != 0;
    ForgetResult last;
    for (const auto& [record, has_support] : support) {
      const bool take = kind == Forget::kAll || (kind == Forget::kSupport && has_support) ||
                        (kind == Forget::kReserveOnly && !has_support);
      if (!take) continue;
      last = s.forget_record("m", record);
      if (kind != Forget::kAll) break;
    }
    EXPECT_GT(last.entry.seq, 0) << "no record of the kind asked for";
    write_json_file(cert_, last.certificate.to_json());
    return last;
  }

  std::string export_dir(const std::string& name = "export") {
    const std::string dir = tmp_.file(name);
    export_memory(store_, StoreOptions{}, "m", dir);
    return dir;
  }

  // The independent verifier, verify_state on the export and Store::verify agree (all pass).
  void expect_all_verify(const std::string& dir) {
    const RunResult py = run_verifier(dir, tmp_, cert_);
    EXPECT_EQ(py.code, 0) << py.out << py.err;
    EXPECT_TRUE(cpp_verifies(dir));
    Store s(store_, [] {
      StoreOptions o;
      o.read_only = true;
      return o;
    }());
    EXPECT_TRUE(s.verify().ok());
  }
};

}  // namespace
}  // namespace svattn
