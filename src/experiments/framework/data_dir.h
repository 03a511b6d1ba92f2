// Where the experiments' data directory is (--data-dir, SVATTN_DATA, ../shared/data) and the
// paths of data files in it, with where to download a missing one (docs/experiments.md "Data directory").
#pragma once
#include <string>

namespace svattn::experiments {

/// Where the data directory came from.
struct DataDir {
  std::string path;    ///< absolute or relative path of the directory
  std::string source;  ///< "--data-dir", "SVATTN_DATA", "../shared/data (current dir)" or
                       ///< "../shared/data (source dir)"
};

/// Resolution order: `flag` (the --data-dir value) when not empty; else the environment variable
/// SVATTN_DATA when set and not empty; else `../shared/data` relative to the current directory when
/// it exists; else `../shared/data` relative to the source tree when it exists. A given directory
/// that does not exist, or no directory at all, throws IoError saying what was tried and how to set
/// one.
DataDir resolve_data_dir(const std::string& flag);

/// Full path of `relative` (e.g. "mimic-iii-demo/vitals.csv.gz") inside the data directory. A
/// missing file throws IoError naming the file, the directory and where to download it.
std::string data_file(const DataDir& dir, const std::string& relative);

/// Where to obtain a data file (used in the error of data_file and in docs).
std::string download_hint(const std::string& relative);

}  // namespace svattn::experiments
