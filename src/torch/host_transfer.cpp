// Host transfers of the exact path: gather to fp64 host memory, results back to the device
// (docs/layers.md "GPU").
#include "host_transfer.h"

#include <cstdint>

namespace svattn::layers::detail {

using torch::Tensor;

namespace {

Tensor host64(const Tensor& t) { return t.detach().to(torch::kCPU, torch::kFloat64).contiguous(); }

// The entries `idx` of `tensors` (all on `device`) as fp64 views of one host buffer.
void gather_device(const std::vector<Tensor>& tensors, const std::vector<std::size_t>& idx,
                   const torch::Device& device, std::vector<Tensor>& out) {
  std::vector<Tensor> flat;
  flat.reserve(idx.size());
  for (std::size_t i : idx) flat.push_back(tensors[i].detach().to(torch::kFloat64).reshape({-1}));
  const Tensor joined = torch::cat(flat);
  Tensor host =
      torch::empty({joined.numel()},
                   torch::TensorOptions().dtype(torch::kFloat64).pinned_memory(device.is_cuda()));
  host.copy_(joined);  // blocking: the solver reads the keys next
  std::int64_t at = 0;
  for (std::size_t k = 0; k < idx.size(); ++k) {
    const Tensor& t = tensors[idx[k]];
    out[idx[k]] = host.narrow(0, at, t.numel()).view(t.sizes());
    at += t.numel();
  }
}

}  // namespace

std::vector<Tensor> to_host64(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> out(tensors.size());
  std::vector<std::size_t> remote;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) continue;
    if (tensors[i].device().is_cpu())
      out[i] = host64(tensors[i]);
    else
      remote.push_back(i);
  }
  while (!remote.empty()) {  // one gather per device (one device in practice)
    const torch::Device device = tensors[remote.front()].device();
    std::vector<std::size_t> same, rest;
    for (std::size_t i : remote) (tensors[i].device() == device ? same : rest).push_back(i);
    gather_device(tensors, same, device, out);
    remote.swap(rest);
  }
  return out;
}

Tensor host_result(torch::IntArrayRef shape, const torch::Device& device, double fill) {
  return torch::full(shape, fill,
                     torch::TensorOptions().dtype(torch::kFloat64).pinned_memory(device.is_cuda()));
}

Tensor to_device(const Tensor& host, const torch::TensorOptions& options) {
  return host.to(options, /*non_blocking=*/options.device().is_cuda());
}

}  // namespace svattn::layers::detail
