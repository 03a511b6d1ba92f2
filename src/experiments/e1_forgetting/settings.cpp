// E1's streams, presets and the ranges of its `--set` keys (docs/experiments.md "E1").
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "common.h"
#include "svattn/batch_solver.h"
#include "svattn/errors.h"
#include "experiments/e1_forgetting/e1_forgetting.h"
#include "experiments/registry.h"
#include "experiments/icu.h"
#include "experiments/report.h"
#include "experiments/streams.h"
#include "svattn/io.h"
#include "svattn/memory.h"
#include "svattn/readout.h"
#include "internal.h"

namespace svattn::experiments::e1_forgetting {
const std::vector<StreamDef>& all_streams() {
  static const std::vector<StreamDef> s = {
      {"gaussian_d2", "gaussian", 2, "i.i.d. N(0, I), d = 2"},
      {"gaussian_d8", "gaussian", 8, "i.i.d. N(0, I), d = 8"},
      {"gaussian_d32", "gaussian", 32, "i.i.d. N(0, I), d = 32"},
      {"gaussian_d64", "gaussian", 64, "i.i.d. N(0, I), d = 64"},
      {"clustered", "clustered", 8, "5 clusters, centres N(0, 16 I), spread 0.3, d = 8"},
      {"near_duplicate", "near_duplicate", 8,
       "every other key a twin of an earlier key at distance ~1e-9..1e-6, d = 8"},
      {"icu_mimic", "icu_mimic", kNumVitals,
       "MIMIC-III demo vitals, hourly, 7 standardised vitals; record = one ICU stay"},
      {"icu_physionet2012", "icu_physionet2012", kNumVitals,
       "PhysioNet/CinC 2012 sets A+B, hourly, 7 standardised vitals; record = one ICU stay"},
      {"learned", "learned", 0, "keys of a trained model (svattn dump-keys), contiguous windows"},
  };
  return s;
}

Settings preset_for(const std::string& name) {
  if (name == "tiny") {
    return {40, 2, {"gaussian_d2", "gaussian_d8", "clustered", "near_duplicate", "learned"}, "tiny", 0, 0};
  }
  if (name == "paper") {
    return {1000, 100,
            {"gaussian_d2", "gaussian_d8", "gaussian_d32", "gaussian_d64", "clustered",
             "near_duplicate", "icu_mimic", "icu_physionet2012", "learned"},
            "tiny", 1500, 4096};
  }
  return {400, 25,
          {"gaussian_d2", "gaussian_d8", "gaussian_d32", "clustered", "near_duplicate", "icu_mimic",
           "learned"},
          "tiny", 200, 2048};
}

const StreamDef& stream_def(const std::string& name) {
  for (const auto& s : all_streams())
    if (s.name == name) return s;
  std::string known;
  for (const auto& s : all_streams()) known += (known.empty() ? "" : ", ") + s.name;
  throw InvalidArgument("unknown E1 stream '" + name + "' (known: " + known + ")");
}

/// One trial's tokens: keys, values and the record each row belongs to.

nlohmann::json preset(const std::string& name) { return preset_for(name); }

RangeTable ranges() {
  RangeTable t;
  t.keys = {{"n", 8, 20000},
            {"trials", 1, 10000},
            {"streams", 0, 0, false, 1, all_streams().size(), stream_names()},
            {"keys_model"},
            {"keys_steps", 0, 1000000},
            {"keys_tokens", 0, 1000000}};
  t.relations = [](const std::string& id, const nlohmann::json& s) {
    const auto& st = s["streams"];
    for (std::size_t i = 0; i < st.size(); ++i)
      for (std::size_t k = 0; k < i; ++k)
        if (st[i] == st[k]) bad(id + ".streams", "a list of distinct streams", st);
    if (s["keys_model"].get<std::string>().empty())
      bad(id + ".keys_model", "an LM preset name", s["keys_model"]);
  };
  return t;
}

std::vector<std::string> stream_names() {
  std::vector<std::string> v;
  for (const auto& s : all_streams()) v.push_back(s.name);
  return v;
}

}  // namespace svattn::experiments::e1_forgetting
