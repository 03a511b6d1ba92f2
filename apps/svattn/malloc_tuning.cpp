// The allocator setting of svattn-torch (malloc_tuning.h).
#include "malloc_tuning.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace svattn::cli {

namespace {

// glibc's default mmap threshold grows dynamically up to 32 MiB, but a freed block at the top of
// the heap above 128 KiB is trimmed back to the kernel, so every training step faults its
// activations in again (about 40,000 minor faults per step of hybrid-800k at 16 x 128 bytes).
constexpr int kMmapThreshold = 32 << 20;  // glibc's largest accepted value on 64-bit
constexpr int kTrimThreshold = 1 << 30;
constexpr int kTopPad = 64 << 20;

std::string& summary() {
  static std::string s = "glibc defaults";
  return s;
}

bool user_chose_allocator_settings() {
  for (const char* v : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"})
    if (std::getenv(v) != nullptr) return true;
  const char* t = std::getenv("GLIBC_TUNABLES");
  return t != nullptr && std::strstr(t, "glibc.malloc.") != nullptr;
}

}  // namespace

void keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  if (std::getenv("SVATTN_NO_MALLOC_TUNING") != nullptr) {
    summary() = "glibc defaults (SVATTN_NO_MALLOC_TUNING)";
    return;
  }
  if (user_chose_allocator_settings()) {
    summary() = "glibc, the environment's settings";
    return;
  }
  const bool ok = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 &&
                  mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1 &&
                  mallopt(M_TOP_PAD, kTopPad) == 1;
  summary() = ok ? "glibc, freed memory kept for reuse (mmap threshold 32 MiB, trim 1 GiB)"
                 : "glibc, partly tuned (mallopt refused a setting)";
#else
  summary() = "not glibc: the C library's defaults";
#endif
}

std::string malloc_tuning_summary() { return summary(); }

}  // namespace svattn::cli
