// E7's identity: id, title, the paper's result and what a build without it needs (the
// registry lists it from here, torch-free; the report titles itself from here).
#pragma once
#include "experiments/framework/experiment_info.h"

namespace svattn::experiments::e7_applications {

/// E7's identity in the registry and the report.
inline constexpr ExperimentInfo kInfo = {
    "E7", "Applications: surgical fact forgetting, exact knowledge editing, patient erasure",
    "qualitative: surgical fact forgetting, exact knowledge editing, patient-record deletion with "
    "\"zero leakage\"",
    "the audited store (svattn_store, SQLite 3): this build has no store "
    "(SVATTN_BUILD_STORE=OFF)"};

}  // namespace svattn::experiments::e7_applications
