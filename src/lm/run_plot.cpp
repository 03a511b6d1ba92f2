// The curves of a run: train.dat / valid.dat from metrics.jsonl, rendered to curves.png by
// gnuplot (support/plot.h).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/plot.h"
#include "svattn/errors.h"
#include "svattn/lm/trainer.h"

namespace svattn::lm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct CurveCounts {
  std::size_t train = 0, valid = 0;
};

// "step value" lines of the train (bpb) and valid (bpc) records.
CurveCounts write_curves(const fs::path& dir) {
  std::ifstream in(dir / "metrics.jsonl");
  if (!in) throw IoError("cannot open " + (dir / "metrics.jsonl").string());
  std::ofstream tr(dir / "train.dat"), va(dir / "valid.dat");
  CurveCounts n;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) continue;
    const std::string type = j.value("type", "");
    if (type != "train" && type != "valid") continue;
    char buf[96];
    std::snprintf(buf, sizeof buf, "%lld %.9g\n", static_cast<long long>(j["step"].get<std::int64_t>()),
                  j[type == "train" ? "bpb" : "bpc"].get<double>());
    (type == "train" ? tr : va) << buf;
    ++(type == "train" ? n.train : n.valid);
  }
  return n;
}

}  // namespace

// The one place the trainer draws a plot: a gnuplot script of the two curves.
std::string plot_run(const std::string& run_dir) {
  const fs::path dir = run_dir;
  const CurveCounts n = write_curves(dir);
  const std::string term = support::gnuplot_terminal();
  if (term.empty())
    return "gnuplot not found: skipped the PNG (data in " + (dir / "train.dat").string() + ", valid.dat)";
  if (n.train == 0) return "no train records: skipped the PNG";
  const fs::path gp = dir / "curves.gp";
  {
    std::ofstream g(gp);
    g << "set terminal " << term << " size 900,540\n"
      << "set output " << support::gnuplot_string((dir / "curves.png").string()) << "\n"
      << "set xlabel 'step'\nset ylabel 'bits per byte'\nset grid\nset key top right\n"
      << "plot " << support::gnuplot_string((dir / "train.dat").string())
      << " using 1:2 with lines lw 1 title 'train (batch)'";
    if (n.valid > 0)
      g << ", " << support::gnuplot_string((dir / "valid.dat").string())
        << " using 1:2 with linespoints lw 2 pt 7 title 'valid BPC'";
    g << "\n";
  }
  if (support::run_gnuplot(gp.string(), "") != 0)
    return "gnuplot failed: no PNG (script " + gp.string() + ")";
  return "wrote " + (dir / "curves.png").string();
}

}  // namespace svattn::lm
