// The field tables of the core's settings structs (include/svattn/field_table.h): validate(), the
// Python bindings' properties and dicts, and the checks of the Python stub read them.
#pragma once
#include <vector>

#include "svattn/batch_solver.h"
#include "svattn/field_table.h"
#include "svattn/memory.h"

namespace svattn {

/// type, bandwidth (rbf), degree and coef0 (poly).
const std::vector<Field<KernelSettings>>& kernel_settings_fields();
/// kernel.type, kernel.bandwidth, kernel.degree, kernel.coef0, C, ridge.
const std::vector<Field<ProblemSettings>>& problem_settings_fields();
/// alpha_tol, kkt_tol, max_refine_iterations (messages prefix them with "tolerances.").
const std::vector<Field<Tolerances>>& tolerances_fields();
/// The fields MemorySettings adds to its problem and tolerances: mode, token_budget,
/// refactor_period, max_steps_per_op, schur_tol.
const std::vector<Field<MemorySettings>>& memory_settings_own_fields();
/// Every leaf of MemorySettings: problem.*, tolerances.*, then its own fields.
const std::vector<Field<MemorySettings>>& memory_settings_fields();
/// smo_tol, max_smo_iterations, cache_mib.
const std::vector<Field<BatchSettings>>& batch_settings_own_fields();
/// Every leaf of BatchSettings: problem.*, tolerances.*, then its own fields.
const std::vector<Field<BatchSettings>>& batch_settings_fields();

}  // namespace svattn
