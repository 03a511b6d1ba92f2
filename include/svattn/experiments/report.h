// The report toolkit of the experiments in one include: statistics, cell formatting, tables, plots,
// the progress line, output files and the data directory (each its own unit under framework/).
#pragma once
#include "svattn/experiments/framework/data_dir.h"
#include "svattn/experiments/framework/files.h"
#include "svattn/experiments/framework/format.h"
#include "svattn/experiments/framework/plots.h"
#include "svattn/experiments/framework/progress.h"
#include "svattn/experiments/framework/statistics.h"
#include "svattn/experiments/framework/table.h"
