// Data-directory resolution (support/data_dir.h): flag, then SVATTN_DATA, then the fallbacks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/data_dir.h"
#include "svattn/errors.h"

namespace {

namespace fs = std::filesystem;
using svattn::support::find_data_dir;

// Sets SVATTN_DATA for a scope (unset when `value` is null) and restores it.
class ScopedDataEnv {
 public:
  explicit ScopedDataEnv(const char* value) {
    if (const char* old = std::getenv("SVATTN_DATA")) {
      had_ = true;
      old_ = old;
    }
    if (value == nullptr)
      ::unsetenv("SVATTN_DATA");
    else
      ::setenv("SVATTN_DATA", value, 1);
  }
  ~ScopedDataEnv() {
    if (had_)
      ::setenv("SVATTN_DATA", old_.c_str(), 1);
    else
      ::unsetenv("SVATTN_DATA");
  }

 private:
  bool had_ = false;
  std::string old_;
};

TEST(SupportDataDir, FlagThenEnvironment) {
  const std::string tmp = fs::temp_directory_path().string();
  {
    ScopedDataEnv env("/nonexistent/svattn-env");
    const auto c = find_data_dir(tmp, "");
    EXPECT_EQ(c.path, tmp);
    EXPECT_EQ(c.source, "--data-dir");
    EXPECT_THROW(find_data_dir("", ""), svattn::IoError);
  }
  {
    ScopedDataEnv env(tmp.c_str());
    const auto c = find_data_dir("", "");
    EXPECT_EQ(c.path, tmp);
    EXPECT_EQ(c.source, "SVATTN_DATA");
  }
  try {
    find_data_dir("/nonexistent/svattn-data", "");
    FAIL() << "no throw";
  } catch (const svattn::IoError& e) {
    EXPECT_NE(std::string(e.what()).find("'/nonexistent/svattn-data' (from --data-dir)"),
              std::string::npos);
  }
}

TEST(SupportDataDir, FallbacksBesideTheWorkingAndSourceDirectories) {
  ScopedDataEnv env(nullptr);
  const fs::path root =
      fs::temp_directory_path() / ("svattn-datadir-" + std::to_string(::getpid()));
  fs::create_directories(root / "work" / "run");
  fs::create_directories(root / "src" / "repo");
  const fs::path cwd = fs::current_path();
  fs::current_path(root / "work" / "run");
  auto none = find_data_dir("", (root / "src" / "repo").string());
  EXPECT_TRUE(none.path.empty());
  EXPECT_EQ(none.tried.size(), 2u);
  fs::create_directories(root / "src" / "shared" / "data");
  auto src = find_data_dir("", (root / "src" / "repo").string());
  EXPECT_EQ(src.source, "../shared/data (source dir)");
  EXPECT_EQ(fs::path(src.path), (root / "src" / "shared" / "data").lexically_normal());
  fs::create_directories(root / "work" / "shared" / "data");
  auto here = find_data_dir("", (root / "src" / "repo").string());
  EXPECT_EQ(here.source, "../shared/data (current dir)");
  EXPECT_EQ(here.path, (fs::path("..") / "shared" / "data").string());
  fs::current_path(cwd);
  fs::remove_all(root);
}

}  // namespace
