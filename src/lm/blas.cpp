// OpenBLAS kernel name and thread count through its C API, when loaded (see blas.h).
#include "svattn/lm/blas.h"

#include <dlfcn.h>

namespace svattn::lm {

std::string blas_core_name() {
  using Fn = char* (*)();
  auto fn = reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (fn == nullptr) return "";
  const char* name = fn();
  return name == nullptr ? "" : name;
}

void set_blas_threads(int threads) {
  using Fn = void (*)(int);
  auto fn = reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (fn != nullptr) fn(threads);
}

}  // namespace svattn::lm
