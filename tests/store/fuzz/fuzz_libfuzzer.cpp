// libFuzzer entry point: SVATTN_FUZZ_TARGET (csv | npy | memory | store) picks the target at
// compile time. Built with clang -fsanitize=fuzzer,address when -DSVATTN_FUZZ=ON.
#include "fuzz_targets.h"

#ifndef SVATTN_FUZZ_TARGET
#error "SVATTN_FUZZ_TARGET must name the target"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const svattn::fuzz::Target t = svattn::fuzz::target_named(SVATTN_FUZZ_TARGET);
  return t(data, size);
}
