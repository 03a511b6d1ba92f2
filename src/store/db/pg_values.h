// Values of PostgreSQL results in binary format (the PostgreSQL backend reads every result so):
// `type` is the column's type oid, `p`/`n` its bytes. Private to the store; needs no libpq.
#pragma once
#include <cstdint>
#include <string>

namespace svattn::store_detail {

/// An integer column (int2/4/8, oid, bool, an integral NUMERIC such as sum()); a float column
/// truncated; anything else parsed from its text. StoreError on a malformed NUMERIC.
std::int64_t pg_int64(unsigned type, const char* p, int n);
/// A float column (float4/8); an integer column converted; anything else parsed from its text.
double pg_real(unsigned type, const char* p, int n);
/// Numbers written as SQLite writes them (floats with 17 significant digits); anything else (text,
/// bytea) the bytes as sent.
std::string pg_text(unsigned type, const char* p, int n);

}  // namespace svattn::store_detail
