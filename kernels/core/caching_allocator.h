// Memory that is reused rather than reallocated every step.
//
// Blocks are rounded up to a size class (multiples of 512 B up to 1 MiB, then multiples of a
// sixteenth of the next power of two: see round_size) and returned to a per-class free list when their last Tensor goes
// away; the next request of that class takes one from the list instead of asking the backend.
// After the first training step a steady-state step therefore makes no raw allocation, which the
// stats make testable. One allocator per device; not thread-safe by design (one training thread
// per rank), guarded by a mutex anyway because tests and the data loader may allocate on the side.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/core/backend.h"

namespace amor {

struct AllocatorStats {
  size_t raw_allocations = 0;  // calls that reached the backend
  size_t requests = 0;         // all allocation requests
  size_t bytes_in_use = 0;     // held by live tensors (rounded sizes)
  size_t peak_bytes_in_use = 0;
  size_t bytes_cached = 0;     // free blocks kept for reuse
};

class CachingAllocator {
 public:
  explicit CachingAllocator(Backend& backend) : backend_(backend) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Returns memory that stays valid while the returned handle lives.
  std::shared_ptr<void> allocate(size_t bytes);
  // Gives every cached free block back to the backend.
  void release_cached();
  AllocatorStats stats() const;
  void reset_peak();
  Backend& backend() { return backend_; }

  static size_t round_size(size_t bytes);

 private:
  void give_back(void* p, size_t rounded);
  Backend& backend_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // rounded size -> free blocks
  AllocatorStats stats_;
};

CachingAllocator& allocator(Device d);

}  // namespace amor
