// Fuzz targets of the store's input surface: the CSV and .npy readers, the memory-file
// deserializer and opening a store file. Each target must never crash, hang or leak on any input;
// rejecting it with a svattn::Error is the expected outcome. Built as libFuzzer binaries with clang
// (-DSVATTN_FUZZ=ON, `slow` label) and, always, as a replay driver that runs them on generated
// seeds and deterministic mutations of them (`unit` label).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace svattn::fuzz {

using Target = int (*)(const std::uint8_t* data, std::size_t size);

int csv_reader(const std::uint8_t* data, std::size_t size);
int npy_reader(const std::uint8_t* data, std::size_t size);
int memory_file(const std::uint8_t* data, std::size_t size);
int store_file(const std::uint8_t* data, std::size_t size);

/// Valid inputs of each target (a CSV, an .npy, a serialized memory, a small store file).
std::vector<std::vector<std::uint8_t>> seeds(const std::string& target);
Target target_named(const std::string& name);

}  // namespace svattn::fuzz
