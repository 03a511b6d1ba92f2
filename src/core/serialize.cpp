// Versioned binary serialization of a Memory with a SHA-256 trailer (docs/math.md).
#include <algorithm>
#include <cstring>
#include <fstream>

#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/memory.h"

namespace svattn {
namespace {

constexpr char kMagic[16] = "SVATTN-MEMORY\0\0";
// Version 2 added the eviction count after schur_tol; version 1 files are still read (count 0).
// Version 3: the state hash is version 2 (docs/math.md §6); older files are upgraded on read.
constexpr std::uint32_t kVersion = 3;  // 3: state hash version 2 (docs/math.md §6)

bool host_little_endian() {
  const std::uint16_t one = 1;
  std::uint8_t first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

class Writer {
 public:
  template <typename T>
  void put(T v) {
    std::uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    if (!host_little_endian()) std::reverse(b, b + sizeof(T));
    const std::size_t old = out.size();
    out.resize(old + sizeof(T));
    std::memcpy(out.data() + old, b, sizeof(T));
  }
  void raw(const void* p, std::size_t n) {
    const std::size_t old = out.size();
    out.resize(old + n);
    std::memcpy(out.data() + old, p, n);
  }
  std::vector<std::uint8_t> out;
};

class Reader {
 public:
  Reader(const std::vector<std::uint8_t>& b, std::size_t end) : b_(b), end_(end) {}
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    std::uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, b_.data() + pos_, sizeof(T));
    if (!host_little_endian()) std::reverse(tmp, tmp + sizeof(T));
    pos_ += sizeof(T);
    T v;
    std::memcpy(&v, tmp, sizeof(T));
    return v;
  }
  std::string str(std::size_t n, const char* what) {
    need(n, what);
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  std::size_t pos() const { return pos_; }

 private:
  void need(std::size_t n, const char* what) {
    if (pos_ + n > end_)
      throw FormatError(std::string("memory file: truncated while reading ") + what + " at byte " +
                        std::to_string(pos_));
  }
  const std::vector<std::uint8_t>& b_;
  std::size_t end_;
  std::size_t pos_ = 0;
};

}  // namespace

std::vector<std::uint8_t> Memory::serialize() const {
  const MemorySettings& s = settings();
  const State st = state();
  const TokenSet t = tokens();
  Writer w;
  w.raw(kMagic, 16);
  w.put<std::uint32_t>(kVersion);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(s.problem.kernel.type));
  w.put<double>(s.problem.kernel.bandwidth);
  w.put<std::int32_t>(s.problem.kernel.degree);
  w.put<double>(s.problem.kernel.coef0);
  w.put<double>(s.problem.C);
  w.put<double>(s.problem.ridge);
  w.put<double>(s.tolerances.alpha_tol);
  w.put<double>(s.tolerances.kkt_tol);
  w.put<std::int32_t>(s.tolerances.max_refine_iterations);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(s.mode));
  w.put<std::uint64_t>(s.token_budget);
  w.put<std::int32_t>(s.refactor_period);
  w.put<std::int32_t>(s.max_steps_per_op);
  w.put<double>(s.schur_tol);
  w.put<std::uint64_t>(evictions());
  w.put<std::int32_t>(dim());
  w.put<std::int32_t>(value_dim());
  w.put<std::uint64_t>(t.ids.size());
  for (size_t r = 0; r < t.ids.size(); ++r) {
    w.put<std::int64_t>(t.ids[r]);
    for (int k = 0; k < dim(); ++k) w.put<double>(t.keys(r, k));
    for (int k = 0; k < value_dim(); ++k) w.put<double>(t.values(r, k));
    w.put<double>(st.alpha[r]);
  }
  w.put<double>(st.b);
  w.raw(st.state_sha256.data(), 64);
  const std::string sum = sha256_hex(w.out);
  w.raw(sum.data(), 64);
  return w.out;
}

namespace {

// Files of version 1 and 2 hold a version-1 state hash: when it checks against the file's tokens
// and coefficients, it is replaced by the same state's current hash; otherwise it is left as it is
// and restore() re-solves (docs/math.md §6).
void upgrade_hash(const ProblemSettings& p, const TokenSet& t, State& st) {
  const auto row = [&](std::size_t r) {
    const auto i = static_cast<Eigen::Index>(r);
    return CanonicalRow{t.ids[r], t.keys.row(i).data(), t.values.row(i).data()};
  };
  for (std::size_t r = 1; r < t.ids.size(); ++r)
    if (!(t.ids[r - 1] < t.ids[r])) return;  // not a canonical order: restore() decides
  if (st.alpha.size() != t.ids.size()) return;
  const int d = static_cast<int>(t.keys.cols()), dv = static_cast<int>(t.values.cols());
  if (canonical_sha256_v1(p, t.ids.size(), d, dv, row, st.alpha, st.b) == st.state_sha256)
    st.state_sha256 = canonical_sha256_rows(p, t.ids.size(), d, dv, row, st.alpha, st.b);
}

}  // namespace

Memory Memory::deserialize(const std::vector<std::uint8_t>& bytes) {
  if (bytes.size() < 16 + 4 + 64) throw FormatError("memory file: too short to be a svattn memory");
  if (std::memcmp(bytes.data(), kMagic, 16) != 0)
    throw FormatError("memory file: bad magic (not a svattn memory)");
  const std::size_t body = bytes.size() - 64;
  const std::string stored(reinterpret_cast<const char*>(bytes.data() + body), 64);
  if (sha256_hex(bytes.data(), body) != stored)
    throw FormatError("memory file: checksum mismatch (corrupt or truncated)");
  Reader r(bytes, body);
  r.str(16, "magic");
  const auto version = r.get<std::uint32_t>("version");
  if (version < 1 || version > kVersion)
    throw FormatError("memory file: unsupported version " + std::to_string(version) +
                      " (this build reads versions 1 to " + std::to_string(kVersion) + ")");
  MemorySettings s;
  const auto kt = r.get<std::uint8_t>("kernel type");
  if (kt > 2) throw FormatError("memory file: bad kernel type " + std::to_string(kt));
  s.problem.kernel.type = static_cast<KernelType>(kt);
  s.problem.kernel.bandwidth = r.get<double>("bandwidth");
  s.problem.kernel.degree = r.get<std::int32_t>("degree");
  s.problem.kernel.coef0 = r.get<double>("coef0");
  s.problem.C = r.get<double>("C");
  s.problem.ridge = r.get<double>("ridge");
  s.tolerances.alpha_tol = r.get<double>("alpha_tol");
  s.tolerances.kkt_tol = r.get<double>("kkt_tol");
  s.tolerances.max_refine_iterations = r.get<std::int32_t>("max_refine_iterations");
  const auto mode = r.get<std::uint8_t>("mode");
  if (mode > 1) throw FormatError("memory file: bad mode " + std::to_string(mode));
  s.mode = static_cast<MemoryMode>(mode);
  s.token_budget = r.get<std::uint64_t>("token_budget");
  s.refactor_period = r.get<std::int32_t>("refactor_period");
  s.max_steps_per_op = r.get<std::int32_t>("max_steps_per_op");
  s.schur_tol = r.get<double>("schur_tol");
  const std::uint64_t evictions = version >= 2 ? r.get<std::uint64_t>("eviction count") : 0;
  try {
    s.validate();
  } catch (const InvalidArgument& e) {
    throw FormatError(std::string("memory file: invalid settings: ") + e.what());
  }
  const int d = r.get<std::int32_t>("dim"), dv = r.get<std::int32_t>("value_dim");
  if (d < 1 || dv < 1) throw FormatError("memory file: bad dimensions");
  const auto n = r.get<std::uint64_t>("token count");
  const std::size_t per = 8 * (2 + static_cast<std::size_t>(d) + dv);
  if (n > (body - r.pos()) / per) throw FormatError("memory file: token count exceeds file size");
  TokenSet t;
  State st;
  st.settings = s.problem;
  st.dim = d;
  st.value_dim = dv;
  t.ids.resize(n);
  t.keys.resize(static_cast<Eigen::Index>(n), d);
  t.values.resize(static_cast<Eigen::Index>(n), dv);
  st.alpha.resize(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    t.ids[i] = r.get<std::int64_t>("token id");
    for (int k = 0; k < d; ++k) t.keys(i, k) = r.get<double>("key");
    for (int k = 0; k < dv; ++k) t.values(i, k) = r.get<double>("value");
    st.alpha[i] = r.get<double>("alpha");
  }
  st.ids = t.ids;
  st.b = r.get<double>("b");
  st.state_sha256 = r.str(64, "state hash");
  if (r.pos() != body) throw FormatError("memory file: trailing bytes before the checksum");
  if (version < 3) upgrade_hash(s.problem, t, st);
  Memory m = restore(s, t, st);
  m.set_evictions(evictions);
  return m;
}

void Memory::save(const std::string& path) const {
  const std::vector<std::uint8_t> b = serialize();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw IoError("save: cannot open '" + tmp + "' for writing");
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f) throw IoError("save: write to '" + tmp + "' failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw IoError("save: cannot rename '" + tmp + "' to '" + path + "'");
}

Memory Memory::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError("load: cannot open '" + path + "'");
  std::vector<std::uint8_t> b((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
  try {
    return deserialize(b);
  } catch (const FormatError& e) {
    throw FormatError("'" + path + "': " + e.what());
  }
}

}  // namespace svattn
