// Helpers of the CLI tests: a per-test temporary directory and running the svattn binary.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/clock.h"
#include "support/shell.h"

namespace svattn::test {

/// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test") {
    static int counter = 0;
    const auto stamp = support::monotonic_nanoseconds();
    path_ = std::filesystem::temp_directory_path() /
            ("svattn-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(stamp) +
             "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& contents) const {
    const std::string p = file(name);
    std::ofstream out(p, std::ios::binary);
    out << contents;
    return p;
  }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using support::shell_quote;

struct RunResult {
  int code = -1;
  std::string out;
  std::string err;
  /// Lines of stderr (without the trailing empty one).
  std::vector<std::string> err_lines() const {
    std::vector<std::string> lines;
    std::stringstream ss(err);
    std::string line;
    while (std::getline(ss, line)) lines.push_back(line);
    return lines;
  }
};

/// Runs `binary args...` with stdout/stderr captured in files of `dir`.
inline RunResult run_binary(const std::string& binary, const std::vector<std::string>& args,
                            const TempDir& dir) {
  static int counter = 0;
  const std::string out = dir.file("stdout." + std::to_string(counter));
  const std::string err = dir.file("stderr." + std::to_string(counter));
  ++counter;
  std::string cmd = shell_quote(binary);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote(out) + " 2>" + shell_quote(err);
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.code =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

/// Expects exit code 2 and exactly one stderr line containing every fragment (the CLI's bad-input
/// contract).
inline void expect_bad_input(const RunResult& r, const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.code, 2) << "stdout: " << r.out << "\nstderr: " << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << "stderr: " << r.err;
  for (const auto& f : fragments)
    EXPECT_NE(lines[0].find(f), std::string::npos) << "missing '" << f << "' in: " << lines[0];
}

}  // namespace svattn::test
