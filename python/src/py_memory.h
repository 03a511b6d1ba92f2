// The Python-side owner of a svattn::Memory: the memory plus the lock that makes calls with the GIL
// released safe. Mutations take the lock exclusively; readout/decision share it after the lazily
// built support cache has been materialised under the exclusive lock (docs/python.md "Threads").
#pragma once
#include <pybind11/pybind11.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "svattn/memory.h"

namespace svattn::python {

namespace py = pybind11;

class PyMemory {
 public:
  explicit PyMemory(Memory m)
      : mem_(std::move(m)), dim_(mem_.dim()), value_dim_(mem_.value_dim()) {}

  /// Fixed for the life of the memory: read without the lock (a readout must not wait for the
  /// exclusive lock while another thread's readout holds it shared).
  int dim() const { return dim_; }
  int value_dim() const { return value_dim_; }

  /// Runs f(Memory&) with the GIL released and the lock held exclusively (the GIL is always
  /// released before the lock is taken, so a thread waiting for the lock never blocks one holding
  /// it).
  template <typename F>
  auto exclusive(F&& f) {
    py::gil_scoped_release nogil;
    std::unique_lock<std::shared_mutex> lock(mu_);
    warm_ = false;
    return f(mem_);
  }
  /// Runs f(const Memory&) with the GIL released and the lock shared with other readers.
  template <typename F>
  auto shared(F&& f) {
    py::gil_scoped_release nogil;
    if (!warm_.load()) {
      std::unique_lock<std::shared_mutex> lock(mu_);
      warm_up();
    }
    std::shared_lock<std::shared_mutex> lock(mu_);
    return f(static_cast<const Memory&>(mem_));
  }

 private:
  // Builds the support cache of the memory (its first readout/decision after a change does).
  void warm_up() {
    if (mem_.size() > 0) mem_.decision(Eigen::VectorXd::Zero(mem_.dim()));
    warm_ = true;
  }

  Memory mem_;
  const int dim_, value_dim_;
  std::shared_mutex mu_;
  std::atomic<bool> warm_{false};
};

}  // namespace svattn::python
