// The installed package works: `cmake --install` this build into a temporary prefix, configure and
// build examples/consumer against it with find_package(svattn), run it, and compare its hash with
// the same solve done in this process.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli/cli_test_util.h"
#include "svattn/batch_solver.h"

namespace svattn {
namespace {

using test::shell_quote;
using test::TempDir;

int sh(const std::string& cmd, const std::string& log) {
  const int status = std::system((cmd + " >>" + shell_quote(log) + " 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Package, InstalledPackageBuildsAConsumer) {
  const std::string cmake = SVATTN_CMAKE_COMMAND;
  if (cmake.empty() || !std::filesystem::exists(cmake)) GTEST_SKIP() << "cmake not found";
  TempDir dir("consumer");
  const std::string prefix = dir.file("prefix");
  const std::string build = dir.file("build");
  const std::string log = dir.file("log.txt");

  // The C++ package only (component Unspecified): the Python component installs into the
  // interpreter's site directory, which a --prefix does not move (docs/python.md "Install").
  ASSERT_EQ(sh(shell_quote(cmake) + " --install " + shell_quote(SVATTN_BINARY_DIR) + " --prefix " +
                   shell_quote(prefix) + " --component Unspecified",
               log),
            0)
      << test::read_text(log);
  ASSERT_TRUE(std::filesystem::exists(prefix + "/include/svattn/svattn.h"));

  std::string configure = shell_quote(cmake) + " -S " + shell_quote(SVATTN_EXAMPLE_DIR) + " -B " +
                          shell_quote(build) + " -G " + shell_quote(SVATTN_CMAKE_GENERATOR) +
                          " -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" + shell_quote(prefix) +
                          " -DCMAKE_CXX_COMPILER=" + shell_quote(SVATTN_CXX_COMPILER);
  const std::string make_program = SVATTN_MAKE_PROGRAM;
  if (!make_program.empty()) configure += " -DCMAKE_MAKE_PROGRAM=" + shell_quote(make_program);
  const std::string sanitize = SVATTN_SANITIZE_FLAGS;
  if (!sanitize.empty()) {
    // The installed library is instrumented; the consumer must link the sanitizer runtime too.
    configure += " -DCMAKE_CXX_FLAGS=" + shell_quote(sanitize) +
                 " -DCMAKE_EXE_LINKER_FLAGS=" + shell_quote(sanitize);
  }
  ASSERT_EQ(sh(configure, log), 0) << test::read_text(log);
  ASSERT_EQ(sh(shell_quote(cmake) + " --build " + shell_quote(build), log), 0)
      << test::read_text(log);

  const std::string out = dir.file("consumer.out");
  const int rc = std::system((shell_quote(build + "/consumer") + " >" + shell_quote(out)).c_str());
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << test::read_text(out);
  const std::string text = test::read_text(out);

  // The same problem solved here.
  RowMatrix keys(4, 2);
  keys << 0, 0, 1, 0, 0, 1, 3, 3;
  BatchSettings settings;
  settings.problem.C = 0.4;
  const State s = solve_batch(TokenSet::from_rows(keys), settings).state;
  EXPECT_NE(text.find("status optimal"), std::string::npos) << text;
  EXPECT_NE(text.find("sha256 " + s.state_sha256), std::string::npos) << text;
}

}  // namespace
}  // namespace svattn
