// Statistics, tables, gnuplot plots, progress line, files and data-directory resolution.
#include "svattn/experiments/report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "svattn/errors.h"

#ifndef SVATTN_SOURCE_DIR
#define SVATTN_SOURCE_DIR ""
#endif

namespace svattn::experiments {
namespace fs = std::filesystem;

// ------------------------------------------------------------------------------------ statistics

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double quantile_of(std::vector<double> v, double p) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(p, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  if (frac == 0.0) return v[lo];
  return v[lo] + frac * (v[hi] - v[lo]);
}

double sd_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

double median_of(std::vector<double> v) { return quantile_of(std::move(v), 0.5); }

double max_of(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  return *std::max_element(v.begin(), v.end());
}

double student_t975(int dof) {
  static const double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262,
                                  2.228,  2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101,
                                  2.093,  2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052,
                                  2.048,  2.045, 2.042};
  if (dof < 1) return std::numeric_limits<double>::quiet_NaN();
  if (dof <= 30) return kTable[dof - 1];
  if (dof <= 40) return 2.042 + (2.021 - 2.042) * (dof - 30) / 10.0;
  if (dof <= 60) return 2.021 + (2.000 - 2.021) * (dof - 40) / 20.0;
  if (dof <= 120) return 2.000 + (1.980 - 2.000) * (dof - 60) / 60.0;
  return 1.960;
}

MeanCi mean_ci95(const std::vector<double>& v) {
  MeanCi r;
  r.n = static_cast<int>(v.size());
  r.mean = mean_of(v);
  if (r.n < 2) return r;
  double ss = 0;
  for (double x : v) ss += (x - r.mean) * (x - r.mean);
  const double sd = std::sqrt(ss / static_cast<double>(r.n - 1));
  r.half_width = student_t975(r.n - 1) * sd / std::sqrt(static_cast<double>(r.n));
  return r;
}

// ------------------------------------------------------------------------------------ formatting

std::string fmt_sci(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (v == 0.0) return "0";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*e", digits, v);
  return buf;
}

std::string fmt_fixed(double v, int digits) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string fmt_mean_ci(const MeanCi& m, int digits) {
  if (m.n == 0) return "n/a";
  return fmt_fixed(m.mean, digits) + " ± " + fmt_fixed(m.half_width, digits);
}

std::string fmt_mean_sd(const std::vector<double>& v, int digits) {
  if (v.empty()) return "n/a";
  return fmt_fixed(mean_of(v), digits) + " ± " + fmt_fixed(sd_of(v), digits);
}

std::string fmt_pct(double share, int digits) {
  if (std::isnan(share)) return "n/a";
  return fmt_fixed(100.0 * share, digits) + " %";
}

// ------------------------------------------------------------------------------------ tables

Table::Table(std::vector<std::string> columns) : columns_(std::move(columns)) {}

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != columns_.size()) {
    throw InvalidArgument("table row has " + std::to_string(cells.size()) + " cells but the table has " +
                          std::to_string(columns_.size()) + " columns");
  }
  rows_.push_back(std::move(cells));
}

namespace {
std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

std::string Table::markdown() const {
  std::ostringstream o;
  o << "|";
  for (const auto& c : columns_) o << " " << md_cell(c) << " |";
  o << "\n|";
  for (std::size_t i = 0; i < columns_.size(); ++i) o << " --- |";
  o << "\n";
  for (const auto& r : rows_) {
    o << "|";
    for (const auto& c : r) o << " " << md_cell(c) << " |";
    o << "\n";
  }
  return o.str();
}

nlohmann::json Table::json() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : rows_) {
    nlohmann::json row = nlohmann::json::object();
    for (std::size_t i = 0; i < columns_.size(); ++i) row[columns_[i]] = r[i];
    rows.push_back(row);
  }
  return {{"columns", columns_}, {"rows", rows}};
}

// ------------------------------------------------------------------------------------ plots

nlohmann::json PlotResult::json() const {
  return {{"file", file}, {"written", written}, {"note", note}};
}

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

/// gnuplot string literal in double quotes.
std::string gp_str(const std::string& s) {
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

bool probe_terminal(const std::string& term) {
  const std::string cmd = "gnuplot -e " + shell_quote("set terminal " + term) + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

PlotResult run_gnuplot(const std::string& out_dir, const std::string& name,
                       const std::string& script_body, const std::string& data) {
  PlotResult r;
  r.file = name + ".png";
  const fs::path src_dir = fs::path(out_dir) / "plot-src";
  ensure_dir(src_dir.string());
  const std::string data_path = (src_dir / (name + ".dat")).string();
  const std::string script_path = (src_dir / (name + ".gp")).string();
  const std::string png_path = (fs::path(out_dir) / r.file).string();
  write_text_file(data_path, data);
  const std::string term = gnuplot_terminal();
  std::string script;
  script += "# Generated by svattn experiments; run `gnuplot " + name + ".gp` in this folder.\n";
  script += "set terminal " + (term.empty() ? std::string("pngcairo") : term) +
            " size 1100,650 noenhanced\n";
  script += "set output " + gp_str(png_path) + "\n";
  script += "datafile = " + gp_str(data_path) + "\n";
  script += script_body;
  write_text_file(script_path, script);
  if (term.empty()) {
    r.note = "plot skipped: gnuplot with a png or pngcairo terminal was not found (install "
             "gnuplot-nox); data and script are in plot-src/";
    return r;
  }
  const std::string cmd = "gnuplot " + shell_quote(script_path) + " 2>" +
                          shell_quote((src_dir / (name + ".log")).string());
  const int rc = std::system(cmd.c_str());
  std::error_code ec;
  if (rc != 0 || !fs::exists(png_path, ec)) {
    r.note = "plot skipped: gnuplot failed (exit " + std::to_string(rc) + "), see plot-src/" + name +
             ".log";
    return r;
  }
  r.written = true;
  return r;
}

}  // namespace

std::string gnuplot_terminal() {
  static const std::string term = [] {
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return std::string();
    if (probe_terminal("pngcairo")) return std::string("pngcairo");
    if (probe_terminal("png")) return std::string("png");
    return std::string();
  }();
  return term;
}

PlotResult write_line_plot(const std::string& out_dir, const std::string& name, const LinePlot& p) {
  std::ostringstream data;
  std::ostringstream body;
  body << "set title " << gp_str(p.title) << "\n";
  body << "set xlabel " << gp_str(p.xlabel) << "\nset ylabel " << gp_str(p.ylabel) << "\n";
  body << "set key below\nset grid\n";
  if (p.logx) body << "set logscale x 2\n";
  if (p.logy) body << "set logscale y\nset format y \"1e%T\"\n";
  if (p.ymin < p.ymax) body << "set yrange [" << num(p.ymin) << ":" << num(p.ymax) << "]\n";
  body << "plot ";
  for (std::size_t s = 0; s < p.series.size(); ++s) {
    const Series& se = p.series[s];
    data << "# " << se.title << "\n";
    for (std::size_t i = 0; i < se.x.size(); ++i) {
      data << num(se.x[i]) << " " << num(se.y[i]) << " "
           << num(i < se.err.size() ? se.err[i] : 0.0) << "\n";
    }
    data << "\n\n";
    if (s > 0) body << ", \\\n     ";
    const bool with_err = !se.err.empty();
    body << "datafile index " << s << " using 1:2" << (with_err ? ":3" : "") << " with "
         << (with_err ? "yerrorlines" : "linespoints") << " lw 2 pt " << (s % 12 + 1)
         << " title " << gp_str(se.title);
  }
  body << "\n";
  return run_gnuplot(out_dir, name, body.str(), data.str());
}

PlotResult write_bar_plot(const std::string& out_dir, const std::string& name, const BarPlot& p) {
  std::ostringstream data;
  data << "category";
  for (const auto& g : p.groups) data << " " << gp_str(g);
  data << "\n";
  for (std::size_t c = 0; c < p.categories.size(); ++c) {
    data << gp_str(p.categories[c]);
    for (std::size_t g = 0; g < p.groups.size(); ++g) {
      const double v = c < p.values[g].size() ? p.values[g][c] : 0.0;
      // log scale cannot show 0: the bar is left out (the table carries the count).
      data << " " << ((p.logy && v <= 0) ? std::string("NaN") : num(v));
    }
    data << "\n";
  }
  std::ostringstream body;
  body << "set title " << gp_str(p.note.empty() ? p.title : p.title + "\n" + p.note) << "\n";
  body << "set xlabel " << gp_str(p.xlabel) << "\nset ylabel " << gp_str(p.ylabel) << "\n";
  body << "set style data histogram\nset style histogram clustered gap 1\n";
  body << "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset key inside top center box opaque\n";
  body << "set grid ytics\nset xtics rotate by -45\nset yrange [0:*]\n";
  if (p.logy) body << "set logscale y\nset yrange [0.8:*]\n";
  body << "plot ";
  for (std::size_t g = 0; g < p.groups.size(); ++g) {
    if (g > 0) body << ", \\\n     ";
    body << "datafile using " << (g + 2) << (g == 0 ? ":xtic(1)" : "") << " title "
         << gp_str(p.groups[g]);
  }
  body << "\n";
  return run_gnuplot(out_dir, name, body.str(), data.str());
}

// ------------------------------------------------------------------------------------ progress

Progress::Progress(std::string label, long total, std::string unit, bool enabled)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      enabled_(enabled),
      tty_(::isatty(::fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::tick(long steps) {
  done_ += steps;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  if (since >= (tty_ ? 0.2 : 10.0)) draw(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (enabled_) draw(true);
}

void Progress::draw(bool final_line) {
  last_draw_ = std::chrono::steady_clock::now();
  const double el = std::chrono::duration<double>(last_draw_ - start_).count();
  const double rate = el > 0 ? static_cast<double>(done_) / el : 0.0;
  char buf[512];
  if (final_line) {
    std::snprintf(buf, sizeof buf, "[%s] %ld/%ld %s in %.1f s (%.1f/s)", label_.c_str(), done_,
                  total_, unit_.c_str(), el, rate);
  } else {
    const double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0.0;
    std::snprintf(buf, sizeof buf, "[%s] %ld/%ld %s, %.1f/s, ETA %.0f s", label_.c_str(), done_,
                  total_, unit_.c_str(), rate, eta);
  }
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", buf, final_line ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", buf);
  }
  std::fflush(stderr);
}

// ------------------------------------------------------------------------------------ files

void ensure_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw IoError("cannot create output directory '" + dir + "': " + ec.message());
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError("cannot write '" + path + "'");
  out << text;
  out.close();
  if (!out) throw IoError("error while writing '" + path + "'");
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  write_text_file(path, j.dump(2) + "\n");
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ------------------------------------------------------------------------------------ data

DataDir resolve_data_dir(const std::string& flag) {
  std::error_code ec;
  if (!flag.empty()) {
    if (!fs::is_directory(flag, ec)) {
      throw IoError("data directory '" + flag + "' (from --data-dir) does not exist");
    }
    return {flag, "--data-dir"};
  }
  const char* env = std::getenv("SVATTN_DATA");
  if (env != nullptr && *env != '\0') {
    if (!fs::is_directory(env, ec)) {
      throw IoError(std::string("data directory '") + env +
                    "' (from the environment variable SVATTN_DATA) does not exist");
    }
    return {env, "SVATTN_DATA"};
  }
  const fs::path cwd_default = fs::path("..") / "shared" / "data";
  if (fs::is_directory(cwd_default, ec)) return {cwd_default.string(), "../shared/data (current dir)"};
  const std::string src = SVATTN_SOURCE_DIR;
  std::string tried = "'" + (fs::current_path(ec) / cwd_default).lexically_normal().string() + "'";
  if (!src.empty()) {
    const fs::path src_default = (fs::path(src) / ".." / "shared" / "data").lexically_normal();
    if (fs::is_directory(src_default, ec)) {
      return {src_default.string(), "../shared/data (source dir)"};
    }
    tried += " and '" + src_default.string() + "'";
  }
  throw IoError("no data directory found (looked for " + tried +
                "): pass --data-dir DIR or set SVATTN_DATA=DIR; docs/experiments.md lists the files "
                "and where to download them");
}

std::string download_hint(const std::string& relative) {
  if (relative.rfind("mimic-iii-demo/", 0) == 0) {
    if (relative == "mimic-iii-demo/vitals.csv.gz") {
      return "it is derived from CHARTEVENTS of the MIMIC-III Clinical Database Demo v1.4 "
             "(open access, ODbL: https://physionet.org/content/mimiciii-demo/1.4/); keep the rows "
             "with a numeric value, an ICU stay and a vital-sign itemid (table in "
             "mimic-iii-demo/PROVENANCE.md and docs/experiments.md), columns "
             "icustay_id,charttime,itemid,subject_id,hadm_id,vital,valuenum,error,row_id, sorted by "
             "(icustay_id, charttime, itemid), gzip-compressed";
    }
    return "download the MIMIC-III Clinical Database Demo v1.4 from "
           "https://physionet.org/content/mimiciii-demo/1.4/ (open access, ODbL)";
  }
  if (relative.rfind("physionet2012/", 0) == 0) {
    return "download set-a.tar.gz and set-b.tar.gz (and Outcomes-a/b.txt) of the "
           "PhysioNet/CinC Challenge 2012 from https://physionet.org/content/challenge-2012/1.0.0/ "
           "(open access) into <data-dir>/physionet2012/";
  }
  if (relative.rfind("enwik8/", 0) == 0) {
    return "enwik8 is at http://mattmahoney.net/dc/enwik8.zip; svattn uses its first 4,154,064 "
           "bytes (see enwik8/PROVENANCE.md)";
  }
  if (relative.rfind("tinyshakespeare/", 0) == 0) {
    return "download input.txt from "
           "https://github.com/karpathy/char-rnn/tree/master/data/tinyshakespeare";
  }
  return "see docs/experiments.md for the data files and their sources";
}

std::string data_file(const DataDir& dir, const std::string& relative) {
  const fs::path p = fs::path(dir.path) / relative;
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) {
    throw IoError("missing data file '" + p.string() + "' (data directory '" + dir.path +
                  "' from " + dir.source + "): " + download_hint(relative));
  }
  return p.string();
}

}  // namespace svattn::experiments
