// The report toolkit of the experiments in one include: statistics, cell formatting, tables, plots,
// the progress line, output files and the data directory (each its own unit under framework/).
#pragma once
#include "experiments/framework/data_dir.h"
#include "experiments/framework/files.h"
#include "experiments/framework/format.h"
#include "experiments/framework/plots.h"
#include "experiments/framework/progress.h"
#include "experiments/framework/statistics.h"
#include "experiments/framework/table.h"
