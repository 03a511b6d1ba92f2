// What an experiment says of itself to the registry and the report: its id, title, the paper's
// result and what a build lacking it needs (each experiment owns its own, docs/experiments.md).
#pragma once

namespace svattn::experiments {

struct ExperimentInfo {
  const char* id;            ///< "E1" … "E7"
  const char* title;         ///< the report's section title
  const char* paper_result;  ///< the paper's headline, as the report quotes it
  const char* needs;         ///< what a build without it lacks ("" when every build has it)
};

}  // namespace svattn::experiments
