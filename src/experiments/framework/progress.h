// The progress line of a long measurement on stderr.
#pragma once
#include <chrono>
#include <string>

#include "support/clock.h"

namespace svattn::experiments {

// The support layer's clock (src/support/clock.h), by its short names.
using support::Stopwatch;
using support::utc_now;

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
  Stopwatch elapsed_;     // since the start
  Stopwatch since_draw_;  // since the last line
};

}  // namespace svattn::experiments
