// PNG plots through gnuplot: line and bar plots, their data and script kept beside the image.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace svattn::experiments {

/// One curve; `err` (optional, same length as y) is drawn as symmetric error bars.
struct Series {
  std::string title;
  std::vector<double> x;
  std::vector<double> y;
  std::vector<double> err;
};

struct LinePlot {
  std::string title;
  std::string xlabel;
  std::string ylabel;
  bool logx = false;
  bool logy = false;
  /// Fixed y range when ymin < ymax.
  double ymin = 0;
  double ymax = 0;
  std::vector<Series> series;
};

/// Clustered bars: one category per x position, one bar per group in each category.
struct BarPlot {
  std::string title;
  std::string xlabel;
  std::string ylabel;
  bool logy = false;
  std::vector<std::string> categories;
  std::vector<std::string> groups;
  /// values[g][c]: the bar of group g in category c.
  std::vector<std::vector<double>> values;
  /// Free text printed under the title (e.g. "first bar = deviation exactly 0").
  std::string note;
};

struct PlotResult {
  std::string file;     ///< PNG file name relative to the output directory
  bool written = false;
  std::string note;     ///< why it was skipped, when it was
  nlohmann::json json() const;
};

/// gnuplot's PNG terminal to use ("pngcairo" or "png"), or "" when gnuplot is missing or has
/// neither terminal. Probed once per process.
std::string gnuplot_terminal();

/// Writes `<out_dir>/<name>.png` via a generated script kept in `<out_dir>/plot-src/<name>.gp`
/// (its data in `<name>.dat`). When gnuplot is unavailable or fails, the data and script are still
/// written and the result says the plot was skipped.
PlotResult write_line_plot(const std::string& out_dir, const std::string& name, const LinePlot& p);
PlotResult write_bar_plot(const std::string& out_dir, const std::string& name, const BarPlot& p);

}  // namespace svattn::experiments
