// Shared helpers of the experiments and the report writer: statistics, Markdown/JSON tables, PNG
// plots through gnuplot, a progress line on stderr, output files and data-directory resolution.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/clock.h"

namespace svattn::experiments {

// ------------------------------------------------------------------------------------ statistics

double mean_of(const std::vector<double>& v);
/// Sample standard deviation (0 for fewer than 2 values).
double sd_of(const std::vector<double>& v);
/// Median (mean of the two middle values for an even count); NaN for an empty vector.
double median_of(std::vector<double> v);
/// Linear-interpolated quantile p in [0, 1]; NaN for an empty vector.
double quantile_of(std::vector<double> v, double p);
/// Largest element; NaN for an empty vector.
double max_of(const std::vector<double>& v);

/// Mean and the half width of its two-sided 95 % confidence interval (Student t with n-1 degrees
/// of freedom; half width 0 for n = 1, NaN mean for n = 0).
struct MeanCi {
  double mean = 0;
  double half_width = 0;
  int n = 0;
};
MeanCi mean_ci95(const std::vector<double>& v);
/// Two-sided 97.5 % quantile of Student's t with `dof` degrees of freedom (table, exact to 3 digits).
double student_t975(int dof);

// ------------------------------------------------------------------------------------ formatting

/// "1.23e-09"; "0" for exactly 0 (so an exact zero is never printed as a small number); "nan".
std::string fmt_sci(double v, int digits = 2);
/// Fixed notation with `digits` decimals.
std::string fmt_fixed(double v, int digits = 3);
/// "0.86 ± 0.03".
std::string fmt_mean_ci(const MeanCi& m, int digits = 3);
/// "0.86 ± 0.03": mean and sample sd of `v` ("n/a" for an empty vector).
std::string fmt_mean_sd(const std::vector<double>& v, int digits = 3);
/// "98.0 %" for 0.98.
std::string fmt_pct(double share, int digits = 1);

// ------------------------------------------------------------------------------------ tables

/// A table with string cells, rendered as GitHub Markdown and as JSON (array of row objects keyed
/// by column name).
class Table {
 public:
  explicit Table(std::vector<std::string> columns);
  /// Throws InvalidArgument when the row's width differs from the column count.
  void add_row(std::vector<std::string> cells);
  std::string markdown() const;
  nlohmann::json json() const;
  std::size_t rows() const { return rows_.size(); }
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// ------------------------------------------------------------------------------------ plots

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

// ------------------------------------------------------------------------------------ progress

/// A progress line on stderr: "[label] done/total unit, rate/s, ETA". Redrawn in place on a
/// terminal (at most 5 times a second); elsewhere one line every 10 s and one at the end.
class Progress {
 public:
  Progress(std::string label, long total, std::string unit, bool enabled = true);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void tick(long steps = 1);
  /// Prints the final line (idempotent).
  void finish();

 private:
  void draw(bool final_line);
  std::string label_;
  long total_;
  std::string unit_;
  bool enabled_;
  bool tty_;
  bool finished_ = false;
  long done_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

using svattn::Stopwatch;  // svattn/clock.h

// ------------------------------------------------------------------------------------ files

/// Creates the directory (and parents); throws IoError naming it.
void ensure_dir(const std::string& dir);
/// Writes text / JSON (2-space indent); throws IoError naming the file.
void write_text_file(const std::string& path, const std::string& text);
void write_json_file(const std::string& path, const nlohmann::json& j);
/// Reads a whole file; throws IoError naming it.
std::string read_text_file(const std::string& path);

// ------------------------------------------------------------------------------------ data

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
