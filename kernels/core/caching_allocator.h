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

// Private pools (PyTorch's graph pools), for CUDA graphs (models/infer/decode_graph.h): a replay
// writes the same addresses the capture saw, so no block the capture used may be handed to other
// work while the graph lives. While a pool is active (begin_pool .. end_pool), every allocation
// takes a free block of that pool or a new raw block that then belongs to the pool; a pool's
// block, whenever its last Tensor goes away, returns to the pool's own free list, never to the
// shared one. Blocks freed during the capture are reused by later allocations of the same
// capture (one stream: the replay runs them in the same order). A shared block (allocated before
// the capture) freed while the pool is active is kept aside with the pool too: the graph may read
// it. release_pool() ends the pool
// (after the graph is destroyed): its free blocks go back to the backend, and blocks still held
// by a Tensor join the shared free lists when that Tensor goes away.
using PoolId = uint64_t;

struct AllocatorStats {
  size_t raw_allocations = 0;  // calls that reached the backend
  size_t requests = 0;         // all allocation requests
  size_t bytes_in_use = 0;     // held by live tensors (rounded sizes)
  size_t peak_bytes_in_use = 0;
  size_t bytes_cached = 0;     // free blocks kept for reuse (shared free lists)
  size_t bytes_in_pools = 0;   // free blocks kept by live private pools (not in bytes_cached)
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

  // A new private pool (see above). One pool at most is active at a time; begin_pool() while one
  // is, or on a released pool, is an error.
  PoolId create_pool();
  void begin_pool(PoolId id);
  void end_pool();
  void release_pool(PoolId id);
  // The active pool, 0 when none.
  PoolId active_pool() const;

 private:
  struct Pool {
    std::map<size_t, std::vector<void*>> free;  // rounded size -> the pool's free blocks
    // Shared blocks freed while the pool was active: the graph may read them; shared again when
    // the pool is released.
    std::map<size_t, std::vector<void*>> deferred;
    bool released = false;
  };
  void give_back(void* p, size_t rounded, const std::shared_ptr<Pool>& pool);
  Backend& backend_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // rounded size -> free blocks
  std::map<PoolId, std::shared_ptr<Pool>> pools_;
  std::shared_ptr<Pool> active_;
  PoolId active_id_ = 0, next_pool_ = 1;
  AllocatorStats stats_;
};

// Allocations of `alloc` come from pool `id` while this lives (begin_pool / end_pool).
class PoolScope {
 public:
  PoolScope(CachingAllocator& alloc, PoolId id) : alloc_(alloc) { alloc_.begin_pool(id); }
  ~PoolScope() { alloc_.end_pool(); }
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  CachingAllocator& alloc_;
};

CachingAllocator& allocator(Device d);

}  // namespace amor
