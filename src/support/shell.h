// Quoting for /bin/sh command lines that svattn builds (gnuplot runs, the tests' child processes).
// Header-only.
#pragma once
#include <string>

namespace svattn::support {

/// `s` as one single-quoted /bin/sh word (a ' inside becomes '\'').
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace svattn::support
