// Reading the record-id file of `svattn memory import --records` (record_ids.h).
#include "record_ids.h"

#include <cstring>
#include <regex>

#include "svattn/errors.h"
#include "svattn/io.h"
#include "svattn/store.h"

namespace svattn::cli {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void bad_id(const std::string& path, std::size_t row, const std::string& value) {
  throw FormatError("'" + path + "': row " + std::to_string(row) + " (0-based): record id " +
                    value + " is not an integer in [0, 2^40)");
}

std::vector<std::int64_t> read_csv_ids(const std::string& path, const std::vector<char>& data) {
  std::vector<std::int64_t> ids;
  std::size_t at = 0, line_no = 0;
  while (at < data.size()) {
    std::size_t end = at;
    while (end < data.size() && data[end] != '\n') ++end;
    std::string line(data.data() + at, end - at);
    at = end + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    std::size_t first = 0;
    while (first < line.size() && (line[first] == ' ' || line[first] == '\t')) ++first;
    line.erase(0, first);
    if (line.empty() || line[0] == '#') continue;
    if (line.find(',') != std::string::npos) {
      throw FormatError("'" + path + "': line " + std::to_string(line_no) +
                        ": expected one column of record ids, got '" + line + "'");
    }
    try {
      ids.push_back(parse_decimal(line, 0, kMaxRecordId, "record id"));
    } catch (const InvalidArgument&) {
      bad_id(path, ids.size(), "'" + line + "'");
    }
  }
  return ids;
}

// The .npy header's dict entries (numpy writes them in this form).
std::string header_field(const std::string& path, const std::string& header, const char* key) {
  const std::regex re(std::string("'") + key + "'\\s*:\\s*('[^']*'|True|False|\\([^)]*\\))");
  std::smatch m;
  if (!std::regex_search(header, m, re))
    throw FormatError("'" + path + "': bad .npy header (no '" + key + "')");
  return m[1].str();
}

std::vector<std::int64_t> read_npy_ids(const std::string& path, const std::vector<char>& data) {
  if (data.size() < 10 || std::memcmp(data.data(), "\x93NUMPY", 6) != 0)
    throw FormatError("'" + path + "': not an .npy file (bad magic)");
  const int major = static_cast<unsigned char>(data[6]);
  const std::size_t start = major == 1 ? 10 : 12;
  if (major < 1 || major > 3 || data.size() < start)
    throw FormatError("'" + path + "': unsupported or truncated .npy header");
  std::size_t len = 0;
  for (std::size_t b = start; b-- > 8;) len = (len << 8) | static_cast<unsigned char>(data[b]);
  if (start + len > data.size()) throw FormatError("'" + path + "': truncated .npy header");
  const std::string header(data.data() + start, len);
  const std::string descr = header_field(path, header, "descr");
  const std::string shape = header_field(path, header, "shape");
  const std::regex shape_re("\\(\\s*(\\d+)\\s*,\\s*(1\\s*,?)?\\s*\\)");
  std::smatch sm;
  if (!std::regex_match(shape, sm, shape_re)) {
    throw FormatError("'" + path + "': .npy shape " + shape +
                      " is not one column of record ids ((n,) or (n, 1))");
  }
  const std::regex descr_re("'([<|=])([iuf])([1248])'");
  std::smatch dm;
  if (!std::regex_match(descr, dm, descr_re) || (dm[2] == "f" && dm[3].str() < "4")) {
    throw FormatError("'" + path + "': unsupported .npy dtype " + descr +
                      " for record ids (little-endian integers, or float32/float64)");
  }
  const char kind = dm[2].str()[0];
  const std::size_t item = static_cast<std::size_t>(std::stoi(dm[3].str()));
  const std::size_t n = static_cast<std::size_t>(std::stoull(sm[1].str()));
  const std::size_t payload = data.size() - start - len;
  if (n > payload / item || payload != n * item) {
    throw FormatError("'" + path + "': .npy data holds " + std::to_string(payload) +
                      " bytes, shape " + shape + " needs " + std::to_string(n) + " x " +
                      std::to_string(item));
  }
  const auto* p = reinterpret_cast<const unsigned char*>(data.data() + start + len);
  std::vector<std::int64_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t bits = 0;
    for (std::size_t b = item; b-- > 0;) bits = (bits << 8) | p[i * item + b];
    if (kind == 'f') {
      double v = 0;
      if (item == 8) {
        std::memcpy(&v, &bits, 8);
      } else {
        float f = 0;
        const auto b32 = static_cast<std::uint32_t>(bits);
        std::memcpy(&f, &b32, 4);
        v = f;
      }
      if (!(v >= 0 && v <= static_cast<double>(kMaxRecordId)) ||
          v != static_cast<double>(static_cast<std::int64_t>(v)))
        bad_id(path, i, std::to_string(v));
      ids[i] = static_cast<std::int64_t>(v);
      continue;
    }
    const unsigned shift = static_cast<unsigned>(64 - 8 * item);
    const bool negative =
        kind == 'i' && item < 8 ? (bits >> (8 * item - 1)) & 1 : kind == 'i' && (bits >> 63) != 0;
    if (negative || (bits << shift >> shift) > static_cast<std::uint64_t>(kMaxRecordId))
      bad_id(path, i, negative ? "(negative)" : std::to_string(bits));
    ids[i] = static_cast<std::int64_t>(bits);
  }
  return ids;
}

}  // namespace

std::vector<std::int64_t> read_record_ids(const std::string& path, Eigen::Index want_rows,
                                          const std::string& keys_path) {
  const std::vector<char> data = read_file(path);
  const std::vector<std::int64_t> ids =
      ends_with(path, ".npy") ? read_npy_ids(path, data) : read_csv_ids(path, data);
  if (static_cast<Eigen::Index>(ids.size()) != want_rows) {
    throw FormatError("'" + path + "' has " + std::to_string(ids.size()) + " rows but '" +
                      keys_path + "' has " + std::to_string(want_rows));
  }
  return ids;
}

}  // namespace svattn::cli
