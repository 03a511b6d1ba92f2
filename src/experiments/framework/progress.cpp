// The progress line on stderr (framework/progress.h).
#include "experiments/framework/progress.h"

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
      tty_(::isatty(::fileno(stderr)) != 0) {}

Progress::~Progress() { finish(); }

void Progress::tick(long steps) {
  done_ += steps;
  if (!enabled_) return;
  if (since_draw_.seconds() >= (tty_ ? 0.2 : 10.0)) draw(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (enabled_) draw(true);
}

void Progress::draw(bool final_line) {
  since_draw_.restart();
  const double el = elapsed_.seconds();
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
