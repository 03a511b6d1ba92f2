// Where the character LMs run: LibTorch's threads, the device, and seeded model construction.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "svattn/torch/model.h"

namespace svattn::lm {

/// The most intra-op threads set_threads accepts: 4 x the CPUs of this machine
/// (std::thread::hardware_concurrency, 1 when unknown), at most 1024 (docs/lm.md "Resource bounds").
/// More threads than that only oversubscribe the cores (a thousand threads on two cores ran for
/// minutes).
int max_threads();
/// Sets LibTorch's intra-op threads and, once per process, its inter-op threads. Throws
/// InvalidArgument naming --threads outside [1, max_threads()].
void set_threads(int threads);

/// The LibTorch device named `name` ("cpu", "cuda", "cuda:N"); InvalidArgument for a malformed
/// name or a CUDA device this process cannot use.
torch::Device parse_device(const std::string& name);

/// A CharLm initialised from LibTorch's global CPU generator seeded with `seed`, under the one lock
/// that serialises every seeding of that generator: models built side by side (E3's and E5's
/// workers) start exactly as they would alone.
layers::CharLm seeded_char_lm(const layers::LmConfig& config, std::uint64_t seed);

}  // namespace svattn::lm
