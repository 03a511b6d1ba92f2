// Values of PostgreSQL results in binary format (db/pg_values.h): integers, NUMERIC integers,
// floats and the text of anything else, each converted to the type the caller reads.
#include "pg_values.h"

#include <endian.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "svattn/store_errors.h"

namespace svattn::store_detail {

// Decodes a binary NUMERIC holding an integer (sum() of integers); the fraction is dropped.
namespace {

// Type oids of the results the store reads (PostgreSQL's pg_type.dat).
constexpr unsigned kBool = 16, kInt8 = 20, kInt2 = 21, kInt4 = 23, kOid = 26;
constexpr unsigned kFloat4 = 700, kFloat8 = 701, kNumeric = 1700;

std::int64_t numeric_int(const char* p, int n) {
  auto i16 = [&](int at) {
    std::uint16_t v;
    std::memcpy(&v, p + at, 2);
    return static_cast<std::int16_t>(be16toh(v));
  };
  if (n < 8) throw StoreError("malformed NUMERIC result");
  const int ndigits = i16(0), weight = i16(2);
  const std::uint16_t sign = static_cast<std::uint16_t>(i16(4));
  std::int64_t v = 0;
  for (int i = 0; i < ndigits && i <= weight; ++i) v = v * 10000 + i16(8 + 2 * i);
  for (int i = ndigits; i <= weight; ++i) v *= 10000;
  return sign == 0x4000 ? -v : v;
}

}  // namespace

std::int64_t pg_int64(unsigned type, const char* p, int n) {
  switch (type) {
    case kInt8: {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<std::int64_t>(be64toh(v));
    }
    case kInt4:
    case kOid: {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<std::int32_t>(be32toh(v));
    }
    case kInt2: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return static_cast<std::int16_t>(be16toh(v));
    }
    case kBool:
      return p[0] != 0;
    case kNumeric:
      return numeric_int(p, n);
    case kFloat4:
    case kFloat8:
      return static_cast<std::int64_t>(pg_real(type, p, n));
    default:
      return std::strtoll(std::string(p, static_cast<std::size_t>(n)).c_str(), nullptr, 10);
  }
}

double pg_real(unsigned type, const char* p, int n) {
  switch (type) {
    case kFloat8: {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      v = be64toh(v);
      double d;
      std::memcpy(&d, &v, 8);
      return d;
    }
    case kFloat4: {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      v = be32toh(v);
      float f;
      std::memcpy(&f, &v, 4);
      return f;
    }
    case kInt8:
    case kInt4:
    case kInt2:
    case kBool:
    case kNumeric:
      return static_cast<double>(pg_int64(type, p, n));
    default:
      return std::strtod(std::string(p, static_cast<std::size_t>(n)).c_str(), nullptr);
  }
}

std::string pg_text(unsigned type, const char* p, int n) {
  switch (type) {
    case kInt8:
    case kInt4:
    case kInt2:
    case kBool:
    case kOid:
    case kNumeric:
      return std::to_string(pg_int64(type, p, n));
    case kFloat4:
    case kFloat8: {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", pg_real(type, p, n));
      return buf;
    }
    default:  // text, varchar, name, unknown, bytea: the bytes as sent
      return std::string(p, static_cast<std::size_t>(n));
  }
}

}  // namespace svattn::store_detail
