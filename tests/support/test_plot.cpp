// gnuplot helpers (support/plot.h): string literals, the terminal probe and a script run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/plot.h"

namespace {

namespace fs = std::filesystem;
using namespace svattn::support;

TEST(SupportPlot, GnuplotStringsEscapeQuotesBackslashesAndNewlines) {
  EXPECT_EQ(gnuplot_string("a"), "\"a\"");
  EXPECT_EQ(gnuplot_string("say \"hi\"\\n"), "\"say \\\"hi\\\"\\\\n\"");
  EXPECT_EQ(gnuplot_string("two\nlines"), "\"two\\nlines\"");
}

TEST(SupportPlot, TerminalProbeAndScriptRun) {
  const std::string term = gnuplot_terminal();
  EXPECT_TRUE(term.empty() || term == "pngcairo" || term == "png") << term;
  EXPECT_EQ(term, gnuplot_terminal());  // probed once
  if (term.empty()) GTEST_SKIP() << "no gnuplot with a PNG terminal";
  const fs::path dir = fs::temp_directory_path() / ("svattn-plot-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path png = dir / "it's.png", gp = dir / "plot.gp", log = dir / "plot.log";
  std::ofstream(gp) << "set terminal " << term << " size 200,120\nset output "
                    << gnuplot_string(png.string()) << "\nplot x*x\n";
  EXPECT_EQ(run_gnuplot(gp.string(), log.string()), 0);
  EXPECT_TRUE(fs::exists(png));
  std::ofstream(gp) << "this is not gnuplot\n";
  EXPECT_NE(run_gnuplot(gp.string(), log.string()), 0);
  EXPECT_GT(fs::file_size(log), 0u);
  fs::remove_all(dir);
}

}  // namespace
