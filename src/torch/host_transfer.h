// Host transfers of the exact path (internal to src/torch; docs/layers.md "GPU"): one gather of
// a call's tensors into fp64 host memory, result buffers that can go back to the device without
// blocking.
#pragma once
#include <torch/torch.h>

#include <vector>

namespace svattn::layers::detail {

/// fp64 contiguous, detached host copies of `tensors`, in order (an undefined entry stays
/// undefined). Host tensors are converted one by one (no copy when already fp64 and contiguous);
/// the tensors on one device go to the host together: a device-side concatenation, then one copy
/// into pinned host memory (CUDA) — the one host sync the fp64 solver needs.
std::vector<torch::Tensor> to_host64(const std::vector<torch::Tensor>& tensors);

/// An fp64 host tensor of `shape` filled with `fill`, to receive results that go to `device`:
/// pinned when `device` is CUDA, so that to_device copies it without blocking.
torch::Tensor host_result(torch::IntArrayRef shape, const torch::Device& device, double fill = 0);

/// `host` in the dtype and on the device of `options`; the copy to a CUDA device is non-blocking
/// (stream-ordered: later kernels on the stream see the data).
torch::Tensor to_device(const torch::Tensor& host, const torch::TensorOptions& options);

}  // namespace svattn::layers::detail
