// The progress line on stderr (framework/progress.h).
#include "svattn/experiments/framework/progress.h"

#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <string>

namespace svattn::experiments {

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

}  // namespace svattn::experiments
