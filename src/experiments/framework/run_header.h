// The run header every typed result starts with (preset, seed, machine, UTC time, measuring time)
// and the measure() prologue and epilogue that fill it, written once for E1 … E7.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "support/clock.h"
#include "experiments/framework/json_fields.h"
#include "experiments/options.h"

namespace svattn::experiments {

// The support layer's clock (src/support/clock.h), by its short names.
using support::Stopwatch;
using support::utc_now;

/// The header of a typed result (a base of each experiment's Result; its keys sit at the top
/// level of E?.json beside the experiment's own).
struct RunHeader {
  std::string preset;
  std::uint64_t seed = 0;
  nlohmann::json machine;  ///< machine_info() of the measuring run
  std::string created;     ///< UTC time the measurement started
  double measure_seconds = 0;

  /// The measure() prologue: validates the options (InvalidArgument), records preset, seed,
  /// machine and time, and starts the clock.
  void begin(const ExperimentOptions& options);
  /// The epilogue: measure_seconds = time since begin().
  void end() { measure_seconds = clock_.seconds(); }

 private:
  Stopwatch clock_;
};

/// Machine description for the report header: CPU model, core count, compiler, build type.
nlohmann::json machine_info();

/// The header's rows of the field table of a result type S derived from RunHeader.
template <typename S>
JsonFields<S> run_header_fields() {
  return {json_member<S>("preset", &RunHeader::preset), json_member<S>("seed", &RunHeader::seed),
          json_member<S>("machine", &RunHeader::machine),
          json_member<S>("created", &RunHeader::created),
          json_member<S>("measure_seconds", &RunHeader::measure_seconds)};
}

}  // namespace svattn::experiments
