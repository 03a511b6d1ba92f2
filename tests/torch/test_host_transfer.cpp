// The exact path's host transfers (src/torch/host_transfer.h; docs/gpu.md): the gather to fp64
// host memory, the result buffers and the copy back, on CPU tensors; and the exact op's entry
// checks, which run on the gathered copy.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "svattn/errors.h"
#include "svattn/torch/exact.h"
#include "torch/host_transfer.h"

namespace svattn::layers {
namespace {

using torch::Tensor;

TEST(HostTransfer, GathersFp64ContiguousCopiesInOrder) {
  torch::manual_seed(3);
  const Tensor a = torch::randn({3, 4}, torch::kFloat32).t();  // non-contiguous fp32
  const Tensor b = torch::randn({2, 5}, torch::kFloat64);      // already fp64 and contiguous
  const Tensor c = torch::arange(6, torch::kInt64).view({2, 3});
  const auto host = detail::to_host64({a, Tensor(), b, c});
  ASSERT_EQ(host.size(), 4u);
  EXPECT_FALSE(host[1].defined());
  for (std::size_t i : {0u, 2u, 3u}) {
    EXPECT_EQ(host[i].scalar_type(), torch::kFloat64) << i;
    EXPECT_TRUE(host[i].is_contiguous()) << i;
    EXPECT_TRUE(host[i].device().is_cpu()) << i;
    EXPECT_FALSE(host[i].requires_grad()) << i;
  }
  EXPECT_EQ(host[0].sizes(), a.sizes());
  EXPECT_TRUE(torch::equal(host[0], a.to(torch::kFloat64)));
  EXPECT_EQ(host[2].data_ptr(), b.data_ptr());  // no copy of an fp64 contiguous host tensor
  EXPECT_TRUE(torch::equal(host[3], c.to(torch::kFloat64)));
}

TEST(HostTransfer, ResultBuffersAndTheCopyBack) {
  const Tensor r = detail::host_result({2, 3}, torch::Device(torch::kCPU), -1.5);
  EXPECT_EQ(r.scalar_type(), torch::kFloat64);
  EXPECT_FALSE(r.is_pinned());  // pinned only for a CUDA destination
  EXPECT_TRUE(torch::equal(r, torch::full({2, 3}, -1.5, torch::kFloat64)));
  const Tensor inf = detail::host_result({1}, torch::Device(torch::kCPU),
                                         -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isinf(inf.item<double>()));
  const Tensor back = detail::to_device(r, torch::TensorOptions().dtype(torch::kFloat32));
  EXPECT_EQ(back.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(back, torch::full({2, 3}, -1.5f)));
}

// fp32 inputs come back as fp32 outputs with gradients; a NaN and, with ridge 0 and a key
// gradient, two equal keys are refused by name, as before the checks moved to the host copy.
TEST(HostTransfer, ExactOpChecksTheHostCopy) {
  torch::manual_seed(4);
  ExactSettings s;
  s.problem.C = 0.3;
  Tensor k = torch::randn({1, 2, 6, 3}, torch::kFloat32).requires_grad_(true);
  Tensor v = torch::randn({1, 2, 6, 2}, torch::kFloat32);
  Tensor o = sv_exact_chunked_attention(k, v, k, Tensor(), 2, s);
  EXPECT_EQ(o.scalar_type(), torch::kFloat32);
  o.sum().backward();
  ASSERT_TRUE(k.grad().defined());
  EXPECT_EQ(k.grad().scalar_type(), torch::kFloat32);
  Tensor bad = v.clone();
  bad[0][1][4][0] = std::nan("");
  try {
    sv_exact_chunked_attention(k, bad, k, Tensor(), 2, s);
    ADD_FAILURE() << "a NaN value was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("values must be finite"), std::string::npos) << e.what();
  }
  s.problem.ridge = 0;
  Tensor twins = torch::randn({1, 1, 6, 3}, torch::kFloat64);
  {
    torch::NoGradGuard ng;
    twins[0][0][3].copy_(twins[0][0][1]);
  }
  twins.requires_grad_(true);
  Tensor tv = torch::randn({1, 1, 6, 2}, torch::kFloat64);
  try {
    sv_exact_chunked_attention(twins, tv, twins, Tensor(), 2, s);
    ADD_FAILURE() << "equal keys with ridge 0 were accepted for a key gradient";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("keys 1 and 3"), std::string::npos) << e.what();
  }
  torch::NoGradGuard ng;  // no key gradient: the same keys are accepted
  EXPECT_NO_THROW(sv_exact_chunked_attention(twins, tv, twins, Tensor(), 2, s));
}

}  // namespace
}  // namespace svattn::layers
