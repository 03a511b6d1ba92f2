// The CPU-feature probe (support/cpu_features.h): one cached answer, consistent with the compiler's
// own probe.
#include <gtest/gtest.h>

#include "support/cpu_features.h"

namespace {

using namespace svattn::support;

TEST(SupportCpuFeatures, ProbeIsCachedAndConsistent) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(&f, &cpu_features());
  const CpuFeatures g = probe_cpu_features();
  EXPECT_EQ(f.avx, g.avx);
  EXPECT_EQ(f.avx2_fma(), g.avx2_fma());
  EXPECT_EQ(f.avx512(), g.avx512());
  // Every CPU with AVX-512 F has AVX2, and AVX2 implies AVX.
  if (f.avx512f) EXPECT_TRUE(f.avx2);
  if (f.avx2) EXPECT_TRUE(f.avx);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  EXPECT_EQ(f.avx, static_cast<bool>(__builtin_cpu_supports("avx")));
  EXPECT_EQ(f.avx2_fma(), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
#else
  EXPECT_FALSE(f.avx);
#endif
}

}  // namespace
