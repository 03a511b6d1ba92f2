// Plots through gnuplot: its PNG terminal (probed once), string literals for its scripts, and
// running a script. The data and scripts stay beside the PNG, so a plot can be redrawn by hand.
// Header-only.
#pragma once
#include <cstdlib>
#include <string>

#include "support/shell.h"

namespace svattn::support {

/// `s` as a gnuplot string literal in double quotes (newlines as \n).
inline std::string gnuplot_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

/// Whether gnuplot accepts `set terminal <term>`.
inline bool gnuplot_has_terminal(const std::string& term) {
  const std::string cmd = "gnuplot -e " + shell_quote("set terminal " + term) + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

/// gnuplot's PNG terminal ("pngcairo", else "png"), or "" when gnuplot is missing or has
/// neither; probed once per process.
inline std::string gnuplot_terminal() {
  static const std::string term = [] {
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return std::string();
    if (gnuplot_has_terminal("pngcairo")) return std::string("pngcairo");
    if (gnuplot_has_terminal("png")) return std::string("png");
    return std::string();
  }();
  return term;
}

/// Runs `gnuplot script_path`, its stderr to `log_path` (discarded when empty); the exit status
/// of the shell (0 on success).
inline int run_gnuplot(const std::string& script_path, const std::string& log_path) {
  const std::string cmd = "gnuplot " + shell_quote(script_path) + " >/dev/null 2>" +
                          (log_path.empty() ? std::string("/dev/null") : shell_quote(log_path));
  return std::system(cmd.c_str());
}

}  // namespace svattn::support
