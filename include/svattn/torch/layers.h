// Umbrella header of the LibTorch layers (svattn::torch target). Never included by the core.
#pragma once
#include "svattn/torch/attention.h"
#include "svattn/torch/batched.h"
#include "svattn/torch/eviction.h"
#include "svattn/torch/exact.h"
#include "svattn/torch/model.h"
#include "svattn/torch/settings_fields.h"
