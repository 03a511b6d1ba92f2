// Resolution of the data directory of real corpora and datasets: --data-dir, then $SVATTN_DATA,
// then ../shared/data beside the working directory, then beside the source tree (README "Data").
// Header-only.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "svattn/errors.h"

namespace svattn::support {

/// The directory chosen, where it came from, and the fallbacks looked at.
struct DataDirChoice {
  std::string path;                ///< empty when no candidate exists
  std::string source;              ///< "--data-dir", "SVATTN_DATA", "../shared/data (...)"
  std::vector<std::string> tried;  ///< fallbacks looked at (absolute), when none was given
};

/// --data-dir `flag`, else $SVATTN_DATA, else ../shared/data of the working directory, else
/// `source_dir`/../shared/data when `source_dir` is not empty. A flag or variable that names no
/// directory throws IoError; no fallback found gives an empty path.
inline DataDirChoice find_data_dir(const std::string& flag, const std::string& source_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!flag.empty()) {
    if (!fs::is_directory(flag, ec))
      throw IoError("data directory '" + flag + "' (from --data-dir) does not exist");
    return {flag, "--data-dir", {}};
  }
  const char* env = std::getenv("SVATTN_DATA");
  if (env != nullptr && *env != '\0') {
    if (!fs::is_directory(env, ec)) {
      throw IoError(std::string("data directory '") + env +
                    "' (from the environment variable SVATTN_DATA) does not exist");
    }
    return {env, "SVATTN_DATA", {}};
  }
  DataDirChoice c;
  const fs::path cwd_default = fs::path("..") / "shared" / "data";
  if (fs::is_directory(cwd_default, ec))
    return {cwd_default.string(), "../shared/data (current dir)", {}};
  c.tried.push_back((fs::current_path(ec) / cwd_default).lexically_normal().string());
  if (!source_dir.empty()) {
    const fs::path src_default =
        (fs::path(source_dir) / ".." / "shared" / "data").lexically_normal();
    if (fs::is_directory(src_default, ec))
      return {src_default.string(), "../shared/data (source dir)", {}};
    c.tried.push_back(src_default.string());
  }
  return c;
}

}  // namespace svattn::support
