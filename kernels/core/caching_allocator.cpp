#include "kernels/core/caching_allocator.h"

#include <algorithm>

#include "kernels/core/error.h"

namespace amor {

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  constexpr size_t kSmall = 512;
  constexpr size_t kMiB = size_t(1) << 20;
  if (bytes <= kMiB) return (bytes + kSmall - 1) / kSmall * kSmall;
  // Above 1 MiB: round to a multiple of 1/16 of the next power of two p; since p < 2*bytes the
  // waste stays under 12.5%
  // while differently-sized activations of one model still share classes.
  size_t p = kMiB;
  while (p < bytes) p <<= 1;
  size_t step = p / 16;
  return (bytes + step - 1) / step * step;
}

std::shared_ptr<void> CachingAllocator::allocate(size_t bytes) {
  size_t rounded = round_size(bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.requests++;
    auto it = free_.find(rounded);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      stats_.bytes_cached -= rounded;
    }
  }
  if (!p) {
    try {
      p = backend_.raw_allocate(rounded);
    } catch (const OutOfMemory&) {
      // Free blocks of other size classes may add up to what is asked: give them all back to the
      // device and try once more (what PyTorch's allocator does before it reports OOM).
      if (stats().bytes_cached == 0) throw;
      release_cached();
      p = backend_.raw_allocate(rounded);
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.raw_allocations++;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.bytes_in_use += rounded;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  }
  return std::shared_ptr<void>(p, [this, rounded](void* q) { give_back(q, rounded); });
}

void CachingAllocator::give_back(void* p, size_t rounded) {
  std::lock_guard<std::mutex> lock(mu_);
  free_[rounded].push_back(p);
  stats_.bytes_in_use -= rounded;
  stats_.bytes_cached += rounded;
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) backend_.raw_free(p);
    stats_.bytes_cached -= size * blocks.size();
    blocks.clear();
  }
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

CachingAllocator::~CachingAllocator() { release_cached(); }

CachingAllocator& allocator(Device d) {
  // Leaked on purpose: tensors held in static storage may outlive any destruction order.
  static CachingAllocator* cpu = new CachingAllocator(backend(Device::CPU));
  if (d == Device::CPU) return *cpu;
  static CachingAllocator* gpu = new CachingAllocator(backend(Device::CUDA));
  return *gpu;
}

}  // namespace amor
