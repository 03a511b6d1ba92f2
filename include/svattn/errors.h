// Typed exceptions for user and API misuse. Numerical outcomes are never exceptions: they are a
// Status in the result (see types.h).
#pragma once
#include <stdexcept>
#include <string>

namespace svattn {

/// Base of every exception svattn throws on misuse.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A setting or argument is out of its domain; the message names the field and the bad value.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// A file could not be opened, read or written.
class IoError : public Error {
 public:
  using Error::Error;
};

/// A file was read but its contents are malformed (ragged rows, NaN, bad magic, checksum, ...).
/// The message names the file and, where relevant, the row and column.
class FormatError : public Error {
 public:
  using Error::Error;
};

/// An operation refers to something that does not exist or already exists (unknown token id,
/// duplicate id, unknown memory or record).
class NotFound : public Error {
 public:
  using Error::Error;
};
class AlreadyExists : public Error {
 public:
  using Error::Error;
};

/// Internal invariant check that stays on in release builds. Tests exercise it.
[[noreturn]] void invariant_failed(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace svattn

#define SVATTN_ASSERT(cond, msg) \
  do {                           \
    if (!(cond)) ::svattn::invariant_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
