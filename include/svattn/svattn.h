// Umbrella header of the torch-free core.
#pragma once
#include "svattn/batch_solver.h"
#include "svattn/certificate.h"
#include "svattn/errors.h"
#include "svattn/hash.h"
#include "svattn/io.h"
#include "svattn/kernel.h"
#include "svattn/memory.h"
#include "svattn/readout.h"
#include "svattn/types.h"
