// Reading and writing token matrices (.csv / .npy), ROWS specs and the JSON of a state.
#include "svattn/io.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "svattn/errors.h"

namespace svattn {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr std::size_t kNpyMagicLen = 6;

std::string quoted(const std::string& s) {
  // Keeps messages on one line whatever the input holds.
  std::string out = "'";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += '?';
    } else {
      out += c;
    }
  }
  if (out.size() > 41) out = out.substr(0, 38) + "...";
  return out + "'";
}

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n\v\f";
  const auto first = s.find_first_not_of(ws);
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(ws);
  return s.substr(first, last - first + 1);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  std::string tail = s.substr(s.size() - suffix.size());
  std::transform(tail.begin(), tail.end(), tail.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return tail == suffix;
}

std::vector<char> read_all(const std::string& path) { return read_file(path); }

/// Parses one CSV cell as a finite double. Returns false with `why` set on failure.
bool parse_double(const std::string& cell, double* out, std::string* why) {
  if (cell.empty()) {
    *why = "empty cell";
    return false;
  }
  const char* first = cell.data();
  const char* last = cell.data() + cell.size();
  if (*first == '+') ++first;
  double v = 0;
  const auto res = std::from_chars(first, last, v, std::chars_format::general);
  if (res.ec == std::errc::result_out_of_range) {
    *why = "value " + quoted(cell) + " is out of the range of a double";
    return false;
  }
  if (res.ec != std::errc() || res.ptr != last || first == last) {
    *why = "non-numeric value " + quoted(cell);
    return false;
  }
  if (!std::isfinite(v)) {
    *why = "non-finite value " + quoted(cell) + " (NaN/Inf are not allowed)";
    return false;
  }
  *out = v;
  return true;
}

RowMatrix read_csv(const std::string& path, const std::vector<char>& data) {
  std::vector<double> cells;
  long rows = 0;
  long cols = -1;
  long cols_line = 0;
  long line_no = 0;
  std::size_t pos = 0;
  while (pos < data.size()) {
    // Lines end at LF, CRLF or a lone CR (classic Mac files).
    std::size_t end = pos;
    while (end < data.size() && data[end] != '\n' && data[end] != '\r') ++end;
    std::string line(data.data() + pos, end - pos);
    pos = end + 1;
    if (end < data.size() && data[end] == '\r' && pos < data.size() && data[pos] == '\n') ++pos;
    ++line_no;
    if (line_no == 1 && line.size() >= 3 && static_cast<unsigned char>(line[0]) == 0xEF &&
        static_cast<unsigned char>(line[1]) == 0xBB &&
        static_cast<unsigned char>(line[2]) == 0xBF) {
      line = line.substr(3);  // UTF-8 byte order mark
    }
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    long col = 0;
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = t.find(',', start);
      const std::string cell =
          trim(t.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      ++col;
      double v = 0;
      std::string why;
      if (!parse_double(cell, &v, &why)) {
        throw FormatError(path + ": line " + std::to_string(line_no) + ", column " +
                          std::to_string(col) + ": " + why);
      }
      cells.push_back(v);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (cols < 0) {
      cols = col;
      cols_line = line_no;
    } else if (col != cols) {
      throw FormatError(path + ": line " + std::to_string(line_no) + ": ragged row with " +
                        std::to_string(col) + " columns, expected " + std::to_string(cols) +
                        " (as on line " + std::to_string(cols_line) + ")");
    }
    ++rows;
  }
  if (rows == 0) {
    throw FormatError(path + ": empty file (no data rows)");
  }
  RowMatrix m(rows, cols);
  std::copy(cells.begin(), cells.end(), m.data());
  return m;
}

// ------------------------------------------------------------------ .npy header dictionary

/// The subset of Python literal syntax that numpy writes in an .npy header.
struct PyValue {
  enum Kind { kString, kBool, kTuple, kInt } kind = kInt;
  std::string str;
  bool boolean = false;
  long long integer = 0;
  std::vector<long long> tuple;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& path, const std::string& text) : path_(path), text_(text) {}

  std::vector<std::pair<std::string, PyValue>> parse_dict() {
    std::vector<std::pair<std::string, PyValue>> out;
    skip_ws();
    expect('{');
    skip_ws();
    while (peek() != '}') {
      const std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      PyValue v = parse_value();
      for (const auto& kv : out) {
        if (kv.first == key) fail("duplicate key '" + key + "'");
      }
      out.emplace_back(key, std::move(v));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        skip_ws();
      } else if (peek() != '}') {
        fail("expected ',' or '}'");
      }
    }
    ++pos_;
    skip_ws();
    if (pos_ != text_.size()) fail("trailing characters after the dictionary");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw FormatError(path_ + ": bad .npy header (" + why + " at offset " + std::to_string(pos_) +
                      ")");
  }
  char peek() const {
    if (pos_ >= text_.size()) fail("unexpected end of header");
    return text_[pos_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  void skip_ws() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  std::string parse_string() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    ++pos_;
    std::string s;
    while (peek() != q) {
      if (peek() == '\\') fail("escape sequences are not supported");
      s += text_[pos_++];
    }
    ++pos_;
    return s;
  }
  long long parse_int() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (start == pos_) fail("expected a non-negative integer");
    long long v = 0;
    const auto res = std::from_chars(text_.data() + start, text_.data() + pos_, v);
    if (res.ec != std::errc()) fail("integer out of range");
    // Python 2 era headers may write 3L.
    if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;
    return v;
  }
  PyValue parse_value() {
    PyValue v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = PyValue::kString;
      v.str = parse_string();
    } else if (text_.compare(pos_, 4, "True") == 0) {
      v.kind = PyValue::kBool;
      v.boolean = true;
      pos_ += 4;
    } else if (text_.compare(pos_, 5, "False") == 0) {
      v.kind = PyValue::kBool;
      v.boolean = false;
      pos_ += 5;
    } else if (c == '(') {
      v.kind = PyValue::kTuple;
      ++pos_;
      skip_ws();
      while (peek() != ')') {
        v.tuple.push_back(parse_int());
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          skip_ws();
        } else if (peek() != ')') {
          fail("expected ',' or ')' in the shape tuple");
        }
      }
      ++pos_;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      v.kind = PyValue::kInt;
      v.integer = parse_int();
    } else {
      fail("unsupported value");
    }
    return v;
  }

  const std::string& path_;
  const std::string& text_;
  std::size_t pos_ = 0;
};

std::uint32_t read_le(const std::vector<char>& d, std::size_t at, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(d[at + i]);
  return v;
}

RowMatrix read_npy(const std::string& path, const std::vector<char>& data) {
  if (data.size() < kNpyMagicLen + 4 || std::memcmp(data.data(), kNpyMagic, kNpyMagicLen) != 0) {
    throw FormatError(path + ": not an .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(data[6]);
  std::size_t header_len = 0;
  std::size_t header_start = 0;
  if (major == 1) {
    header_len = read_le(data, 8, 2);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) throw FormatError(path + ": truncated .npy header");
    header_len = read_le(data, 8, 4);
    header_start = 12;
  } else {
    throw FormatError(path + ": unsupported .npy format version " + std::to_string(major));
  }
  if (header_start + header_len > data.size()) {
    throw FormatError(path + ": truncated .npy header (needs " + std::to_string(header_len) +
                      " bytes)");
  }
  const std::string header(data.data() + header_start, header_len);
  HeaderParser parser(path, header);
  const auto dict = parser.parse_dict();
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (const auto& kv : dict) {
    if (kv.first == "descr") descr = &kv.second;
    if (kv.first == "fortran_order") fortran = &kv.second;
    if (kv.first == "shape") shape = &kv.second;
  }
  if (!descr || descr->kind != PyValue::kString) {
    throw FormatError(path + ": bad .npy header (missing or non-string 'descr')");
  }
  if (!fortran || fortran->kind != PyValue::kBool) {
    throw FormatError(path + ": bad .npy header (missing or non-boolean 'fortran_order')");
  }
  if (!shape || shape->kind != PyValue::kTuple) {
    throw FormatError(path + ": bad .npy header (missing or non-tuple 'shape')");
  }
  const std::string& d = descr->str;
  int item = 0;
  if (d == "<f8" || d == "=f8") {
    item = 8;
  } else if (d == "<f4" || d == "=f4") {
    item = 4;
  } else {
    throw FormatError(path + ": unsupported .npy dtype '" + d +
                      "' (expected little-endian float32 '<f4' or float64 '<f8')");
  }
  if (shape->tuple.size() != 2) {
    throw FormatError(path + ": .npy array has " + std::to_string(shape->tuple.size()) +
                      " dimensions, expected 2 (tokens x features)");
  }
  const long long rows = shape->tuple[0];
  const long long cols = shape->tuple[1];
  if (rows == 0 || cols == 0) {
    throw FormatError(path + ": empty .npy array (shape " + std::to_string(rows) + " x " +
                      std::to_string(cols) + ")");
  }
  const std::size_t payload = data.size() - header_start - header_len;
  const long long limit = static_cast<long long>(1) << 40;
  if (rows > limit / cols || rows * cols > limit / item) {
    throw FormatError(path + ": .npy shape too large");
  }
  const std::size_t need = static_cast<std::size_t>(rows * cols * item);
  if (payload < need) {
    throw FormatError(path + ": truncated .npy data (" + std::to_string(payload) +
                      " bytes, shape " + std::to_string(rows) + " x " + std::to_string(cols) +
                      " needs " + std::to_string(need) + ")");
  }
  if (payload > need) {
    throw FormatError(path + ": " + std::to_string(payload - need) +
                      " unexpected trailing bytes after the .npy data");
  }
  const char* p = data.data() + header_start + header_len;
  RowMatrix m(rows, cols);
  for (long long k = 0; k < rows * cols; ++k) {
    double v = 0;
    if (item == 8) {
      std::uint64_t bits = 0;
      for (int b = 7; b >= 0; --b) bits = (bits << 8) | static_cast<unsigned char>(p[k * 8 + b]);
      std::memcpy(&v, &bits, 8);
    } else {
      std::uint32_t bits = 0;
      for (int b = 3; b >= 0; --b) bits = (bits << 8) | static_cast<unsigned char>(p[k * 4 + b]);
      float f = 0;
      std::memcpy(&f, &bits, 4);
      v = static_cast<double>(f);
    }
    long long r = 0;
    long long c = 0;
    if (fortran->boolean) {
      r = k % rows;
      c = k / rows;
    } else {
      r = k / cols;
      c = k % cols;
    }
    if (!std::isfinite(v)) {
      throw FormatError(path + ": row " + std::to_string(r) + ", column " + std::to_string(c) +
                        " (0-based): non-finite value " + (std::isnan(v) ? "NaN" : "Inf") +
                        " (NaN/Inf are not allowed)");
    }
    m(r, c) = v;
  }
  return m;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError("cannot open '" + path + "' for writing: " + std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw IoError("cannot write '" + path + "'");
}

}  // namespace

std::vector<char> read_file(const std::string& path, std::uint64_t max_bytes) {
  // One input policy for every reader: a regular file (no device, FIFO or directory, which can be
  // endless or block), no larger than max_bytes, read with errors reported as IoError.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw IoError("cannot open '" + path + "': " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw IoError("cannot read '" + path + "': it is a directory");
  if (!S_ISREG(st.st_mode)) {
    throw IoError("cannot read '" + path +
                  "': not a regular file (devices, FIFOs and sockets are not read)");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    throw IoError("cannot read '" + path + "': " + std::to_string(st.st_size) +
                  " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw IoError("cannot open '" + path + "': " + std::strerror(errno));
  std::vector<char> data;
  // st_size is 0 for some kernel files: read in blocks, still bounded by max_bytes.
  char block[1 << 16];
  while (true) {
    const std::size_t got = std::fread(block, 1, sizeof block, f);
    if (got > 0) {
      if (data.size() + got > max_bytes) {
        std::fclose(f);
        throw IoError("cannot read '" + path + "': more than the limit of " +
                      std::to_string(max_bytes) + " bytes");
      }
      data.insert(data.end(), block, block + got);
    }
    if (got < sizeof block) break;
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw IoError("cannot read '" + path + "': " + std::strerror(err));
  return data;
}

namespace {
[[noreturn]] void bad_integer(const std::string& what, const std::string& text,
                              const std::string& why) {
  throw InvalidArgument((what.empty() ? "" : what + ": ") + quoted(text) + " " + why);
}
}  // namespace

std::int64_t parse_decimal(const std::string& text, std::int64_t lo, std::int64_t hi,
                           const std::string& what) {
  // Decimal digits with an optional leading '-'; no sign '+', no blanks, no base prefix, no
  // exponent. Leading zeros are decimal ("010" is ten), never octal.
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first == last) bad_integer(what, text, "is empty (expected a decimal integer)");
  const bool negative = *first == '-';
  const char* digits = negative ? first + 1 : first;
  if (digits == last) bad_integer(what, text, "is not a decimal integer");
  for (const char* c = digits; c != last; ++c) {
    if (*c < '0' || *c > '9') bad_integer(what, text, "is not a decimal integer (digits only)");
  }
  std::int64_t v = 0;
  const auto res = std::from_chars(first, last, v, 10);
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (res.ec == std::errc::result_out_of_range || res.ptr != last || v < lo || v > hi) {
    bad_integer(what, text, "is out of range " + range);
  }
  return v;
}

void check_utf8(const std::string& text, const std::string& what) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // bounds of the second byte (overlongs and surrogates)
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) {
      const unsigned char b = s[i + k];
      ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    }
    if (!ok) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      throw InvalidArgument((what.empty() ? "" : what + ": ") + "not valid UTF-8 (byte " + hex + " at offset " +
                            std::to_string(i) + ")");
    }
    i += len;
  }
}

RowMatrix read_matrix(const std::string& path) {
  const std::vector<char> data = read_all(path);
  const bool has_magic =
      data.size() >= kNpyMagicLen && std::memcmp(data.data(), kNpyMagic, kNpyMagicLen) == 0;
  if (ends_with(path, ".npy") || has_magic) return read_npy(path, data);
  return read_csv(path, data);
}

void write_npy(const std::string& path, const RowMatrix& m) {
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (" +
                       std::to_string(m.rows()) + ", " + std::to_string(m.cols()) + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n' is padded to a multiple of 64 bytes.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string bytes(kNpyMagic, kNpyMagicLen);
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>((header.size() >> 8) & 0xff);
  bytes += header;
  bytes.reserve(bytes.size() + static_cast<std::size_t>(m.size()) * 8);
  for (Eigen::Index r = 0; r < m.rows(); ++r) {
    for (Eigen::Index c = 0; c < m.cols(); ++c) {
      const double v = m(r, c);
      std::uint64_t bits = 0;
      std::memcpy(&bits, &v, 8);
      for (int b = 0; b < 8; ++b) bytes += static_cast<char>((bits >> (8 * b)) & 0xff);
    }
  }
  write_file(path, bytes);
}

void write_csv(const std::string& path, const RowMatrix& m) {
  std::string bytes;
  char buf[64];
  for (Eigen::Index r = 0; r < m.rows(); ++r) {
    for (Eigen::Index c = 0; c < m.cols(); ++c) {
      if (c > 0) bytes += ',';
      std::snprintf(buf, sizeof(buf), "%.17g", m(r, c));
      bytes += buf;
    }
    bytes += '\n';
  }
  write_file(path, bytes);
}

std::vector<TokenId> parse_rows(const std::string& spec, int n) {
  if (trim(spec).empty()) throw InvalidArgument("ROWS is empty (expected e.g. '3,10-12')");
  std::vector<TokenId> ids;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = spec.find(',', start);
    const std::string item =
        trim(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    const std::string where = "ROWS item " + quoted(item) + " in " + quoted(spec);
    if (item.empty()) throw InvalidArgument("empty item in ROWS " + quoted(spec));
    if (item[0] == '-') throw InvalidArgument(where + ": negative row ids are not allowed");
    const std::size_t dash = item.find('-');
    auto parse_id = [&](const std::string& text) -> TokenId {
      const std::string t = trim(text);
      if (t.empty()) throw InvalidArgument(where + ": empty range bound");
      if (t[0] == '-') throw InvalidArgument(where + ": negative row ids are not allowed");
      const TokenId v = parse_decimal(t, 0, std::numeric_limits<TokenId>::max(), where);
      if (v >= n) {
        throw InvalidArgument(where + ": row " + std::to_string(v) +
                              " is out of range (the file has " + std::to_string(n) + " rows)");
      }
      return v;
    };
    if (dash == std::string::npos) {
      ids.push_back(parse_id(item));
    } else {
      const TokenId lo = parse_id(item.substr(0, dash));
      const TokenId hi = parse_id(item.substr(dash + 1));
      if (hi < lo)
        throw InvalidArgument(where + ": reversed range (" + std::to_string(lo) + " > " +
                              std::to_string(hi) + ")");
      for (TokenId v = lo; v <= hi; ++v) ids.push_back(v);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

nlohmann::json settings_to_json(const ProblemSettings& s) {
  nlohmann::json j;
  j["kernel"] = to_string(s.kernel.type);
  j["bandwidth"] = s.kernel.bandwidth;
  j["degree"] = s.kernel.degree;
  j["coef0"] = s.kernel.coef0;
  j["C"] = s.C;
  j["ridge"] = s.ridge;
  return j;
}

nlohmann::json state_to_json(const State& s) {
  nlohmann::json j;
  j["n"] = s.ids.size();
  j["dim"] = s.dim;
  j["settings"] = settings_to_json(s.settings);
  j["status"] = to_string(s.status);
  j["warmup"] = s.warmup;
  j["ids"] = s.ids;
  j["alpha"] = s.alpha;
  j["b"] = s.b;
  j["partition"] = {{"margin", s.partition.margin},
                    {"error", s.partition.error},
                    {"reserve", s.partition.reserve}};
  j["kkt"] = {{"max_violation", s.kkt.max_violation},
              {"sum_error", s.kkt.sum_error},
              {"box_violation", s.kkt.box_violation}};
  j["state_sha256"] = s.state_sha256;
  return j;
}

}  // namespace svattn
