// Solves a tiny support-vector memory problem with an installed svattn and prints its hash.
#include <svattn/svattn.h>

#include <cstdio>

int main() {
  svattn::RowMatrix keys(4, 2);
  keys << 0, 0, 1, 0, 0, 1, 3, 3;
  svattn::BatchSettings settings;
  settings.problem.C = 0.4;  // RBF kernel, bandwidth 1
  const svattn::State s = svattn::solve_batch(svattn::TokenSet::from_rows(keys), settings).state;
  std::printf("status %s, |S| %zu, |E| %zu, sha256 %s\n", svattn::to_string(s.status).c_str(),
              s.partition.margin.size(), s.partition.error.size(), s.state_sha256.c_str());
  return s.status == svattn::Status::kOptimal ? 0 : 1;
}
