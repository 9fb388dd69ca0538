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
  std::shared_ptr<Pool> pool;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.requests++;
    pool = active_;
    auto& lists = pool ? pool->free : free_;
    auto it = lists.find(rounded);
    if (it != lists.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      (pool ? stats_.bytes_in_pools : stats_.bytes_cached) -= rounded;
    }
  }
  if (!p) {
    try {
      p = backend_.raw_allocate(rounded);
    } catch (const OutOfMemory&) {
      // Free blocks of other size classes may add up to what is asked: give them all back to the
      // device and try once more (what PyTorch's allocator does before it reports OOM). A private
      // pool's free blocks stay: its graph may still use them.
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
  return std::shared_ptr<void>(p, [this, rounded, pool](void* q) { give_back(q, rounded, pool); });
}

void CachingAllocator::give_back(void* p, size_t rounded, const std::shared_ptr<Pool>& pool) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.bytes_in_use -= rounded;
  if (pool && !pool->released) {
    pool->free[rounded].push_back(p);
    stats_.bytes_in_pools += rounded;
    return;
  }
  if (active_) {
    // A shared block (or one of a released pool) freed during a capture may still be read by the
    // graph (a tensor made before the capture whose last use was captured): kept aside until the
    // pool is released.
    active_->deferred[rounded].push_back(p);
    stats_.bytes_in_pools += rounded;
    return;
  }
  free_[rounded].push_back(p);
  stats_.bytes_cached += rounded;
}

PoolId CachingAllocator::create_pool() {
  std::lock_guard<std::mutex> lock(mu_);
  const PoolId id = next_pool_++;
  pools_[id] = std::make_shared<Pool>();
  return id;
}

void CachingAllocator::begin_pool(PoolId id) {
  std::lock_guard<std::mutex> lock(mu_);
  AMOR_CHECK(!active_, "CachingAllocator::begin_pool({}): pool {} is already active", id,
             active_id_);
  auto it = pools_.find(id);
  AMOR_CHECK(it != pools_.end(), "CachingAllocator::begin_pool({}): no such pool (released?)", id);
  active_ = it->second;
  active_id_ = id;
}

void CachingAllocator::end_pool() {
  std::lock_guard<std::mutex> lock(mu_);
  active_.reset();
  active_id_ = 0;
}

PoolId CachingAllocator::active_pool() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_id_;
}

void CachingAllocator::release_pool(PoolId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pools_.find(id);
  if (it == pools_.end()) return;
  std::shared_ptr<Pool> pool = it->second;
  pools_.erase(it);
  if (active_ == pool) {
    active_.reset();
    active_id_ = 0;
  }
  pool->released = true;  // blocks still held join the shared lists when freed (give_back)
  for (auto& [size, blocks] : pool->free) {
    for (void* p : blocks) backend_.raw_free(p);
    stats_.bytes_in_pools -= size * blocks.size();
    blocks.clear();
  }
  for (auto& [size, blocks] : pool->deferred) {
    for (void* p : blocks) free_[size].push_back(p);
    stats_.bytes_in_pools -= size * blocks.size();
    stats_.bytes_cached += size * blocks.size();
    blocks.clear();
  }
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

CachingAllocator::~CachingAllocator() {
  std::vector<PoolId> ids;
  for (const auto& [id, pool] : pools_) ids.push_back(id);
  for (PoolId id : ids) release_pool(id);
  release_cached();
}

CachingAllocator& allocator(Device d) {
  // Leaked on purpose: tensors held in static storage may outlive any destruction order.
  static CachingAllocator* cpu = new CachingAllocator(backend(Device::CPU));
  if (d == Device::CPU) return *cpu;
  static CachingAllocator* gpu = new CachingAllocator(backend(Device::CUDA));
  return *gpu;
}

}  // namespace amor
