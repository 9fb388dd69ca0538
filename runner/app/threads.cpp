#include "runner/app/threads.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace amor {

namespace {

// A positive whole number at the start of an environment value ("4", or "4,2" as OpenMP's
// nested lists); nullopt for anything else.
std::optional<int> positive(const std::optional<std::string>& v) {
  if (!v || v->empty()) return std::nullopt;
  size_t i = 0;
  long n = 0;
  while (i < v->size() && (*v)[i] >= '0' && (*v)[i] <= '9' && n < 100000) n = n * 10 + ((*v)[i++] - '0');
  if (i == 0 || n < 1 || n > 1024 || (i < v->size() && (*v)[i] != ',')) return std::nullopt;
  return static_cast<int>(n);
}

}  // namespace

ThreadChoice choose_threads(int requested, const EnvLookup& env, int cpus, int ranks_on_node) {
  if (requested > 0) return {requested, "--threads"};
  for (const char* var : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"})
    if (auto n = positive(env(var))) return {*n, fmt::format("auto: {}", var)};
  cpus = std::max(cpus, 1);
  ranks_on_node = std::max(ranks_on_node, 1);
  return {std::max(1, cpus / ranks_on_node),
          fmt::format("auto: {} CPU{} / {} rank{} on the node", cpus, cpus == 1 ? "" : "s", ranks_on_node,
                      ranks_on_node == 1 ? "" : "s")};
}

int apply_threads(int threads) {
  const std::string n = std::to_string(threads);
  ::setenv("OPENBLAS_NUM_THREADS", n.c_str(), 1);
  ::setenv("OMP_NUM_THREADS", n.c_str(), 1);
  using SetFn = void (*)(int);
  using GetFn = int (*)();
  if (auto omp_set = reinterpret_cast<SetFn>(::dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) omp_set(threads);
  auto set = reinterpret_cast<SetFn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  auto get = reinterpret_cast<GetFn>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (!set) return threads;
  set(threads);
  return get ? get() : threads;
}

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace amor
