// Process-level allocator setting of svattn-torch (the LibTorch commands: train, eval, dump-keys,
// experiment, reproduce): glibc keeps the memory a training step frees for the next step instead
// of returning it to the kernel and faulting it back in (docs/lm.md "Allocator" measures it).
#pragma once

#include <string>

namespace svattn::cli {

/// Sets glibc's mmap threshold to 32 MiB, its trim threshold to 1 GiB and its top pad to 64 MiB
/// (mallopt), unless SVATTN_NO_MALLOC_TUNING is set or the user already chose an allocator setting
/// (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_, or glibc.malloc in
/// GLIBC_TUNABLES), whose choice then stands. Does nothing outside glibc. Only allocation
/// addresses change, never what is computed.
void keep_freed_memory_for_reuse();

/// "kept for reuse (...)" / "glibc defaults (...)": what keep_freed_memory_for_reuse did, for
/// the training header.
std::string malloc_tuning_summary();

}  // namespace svattn::cli
