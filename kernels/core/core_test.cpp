#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "kernels/core/backend.h"
#include "kernels/core/caching_allocator.h"
#include "kernels/core/check.h"
#include "kernels/core/tensor.h"

namespace amor {
namespace {

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(bf16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is exactly half way between two bf16 values: ties go to the even one (1.0).
  EXPECT_EQ(bf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  // 1 + 3*2^-8 is half way between 1+2^-7 (odd mantissa) and 1+2^-6: rounds up to even.
  EXPECT_EQ(bf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_FLOAT_EQ(static_cast<float>(bf16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isnan(static_cast<float>(bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(static_cast<float>(bf16(std::numeric_limits<float>::infinity()))));
}

TEST(DType, F16RoundTripsEveryHalf) {
  // Every finite f16 value converts to float and back to the same bits.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    f16 h;
    h.bits = static_cast<uint16_t>(b);
    float f = static_cast<float>(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(f16(f).bits, h.bits) << "bits " << b;
  }
  EXPECT_EQ(f16(65520.0f).bits, 0x7c00);  // rounds to inf
  EXPECT_EQ(f16(1.0f / 16777216.0f).bits, 0x0001);  // smallest subnormal 2^-24
}

TEST(Tensor, ShapeViewsAndSlices) {
  Tensor t = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(t.str(), "f32[2,3]@cpu");
  EXPECT_EQ(t.size(-1), 3);
  Tensor v = t.view({3, 2});
  EXPECT_TRUE(v.same_storage(t));
  EXPECT_EQ(v.item(5), 6.0);
  Tensor s = t.slice_flat(2, {2, 2});
  EXPECT_EQ(s.item(0), 3.0);
  s.set_item(0, 30.0);
  EXPECT_EQ(t.item(2), 30.0);  // a slice shares memory
  Tensor c = t.clone();
  c.set_item(0, -1.0);
  EXPECT_EQ(t.item(0), 1.0);  // a clone does not
  EXPECT_THROW(t.view({4, 2}), Error);
  EXPECT_THROW(t.slice_flat(5, {2}), Error);
  EXPECT_THROW(t.data<double>(), Error);
}

TEST(Tensor, DtypeConversion) {
  Tensor t = Tensor::from_vector<double>({3}, {1.5, -2.25, 3.0});
  Tensor h = t.to(DType::BF16);
  EXPECT_EQ(h.str(), "bf16[3]@cpu");
  EXPECT_EQ(h.to(DType::F32).to_vector<float>(), (std::vector<float>{1.5f, -2.25f, 3.0f}));
  EXPECT_EQ(t.to(DType::I32).to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
}

TEST(CachingAllocator, SteadyStateMakesNoRawAllocations) {
  CachingAllocator alloc(backend(Device::CPU));
  for (int step = 0; step < 5; ++step) {
    auto a = alloc.allocate(1000);
    auto b = alloc.allocate(3 << 20);
    auto c = alloc.allocate(1000);
  }
  AllocatorStats s = alloc.stats();
  EXPECT_EQ(s.requests, 15u);
  EXPECT_EQ(s.raw_allocations, 3u);  // the first step's three blocks, reused by the next four
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_GT(s.bytes_cached, 0u);
  alloc.release_cached();
  EXPECT_EQ(alloc.stats().bytes_cached, 0u);
}

// A device of `capacity` bytes: raw_allocate throws OutOfMemory past it, as the CUDA backend does.
class SmallDevice final : public Backend {
 public:
  explicit SmallDevice(size_t capacity) : capacity_(capacity) {}
  Device device() const override { return Device::CPU; }
  void* raw_allocate(size_t bytes) override {
    if (used_ + bytes > capacity_) throw OutOfMemory("out of memory: " + std::to_string(bytes) + " bytes");
    used_ += bytes;
    void* p = ::operator new(bytes);
    sizes_[p] = bytes;
    return p;
  }
  void raw_free(void* p) override {
    used_ -= sizes_.at(p);
    sizes_.erase(p);
    ::operator delete(p);
  }
  void memset_zero(void*, size_t) override {}
  void copy_to_host(void*, const void*, size_t) override {}
  void copy_from_host(void*, const void*, size_t) override {}
  void copy_within(void*, const void*, size_t) override {}
  void synchronize() override {}

 private:
  size_t capacity_, used_ = 0;
  std::map<void*, size_t> sizes_;
};

TEST(CachingAllocator, OutOfMemoryGivesCachedBlocksBackAndRetries) {
  SmallDevice dev(8 << 20);
  CachingAllocator alloc(dev);
  { auto a = alloc.allocate(3 << 20), b = alloc.allocate(3 << 20); }  // 6 MiB cached, in one size class
  EXPECT_EQ(alloc.stats().bytes_cached, size_t(6) << 20);
  auto c = alloc.allocate(5 << 20);  // another class: fits only once the cache is given back
  EXPECT_EQ(alloc.stats().bytes_cached, 0u);
  EXPECT_EQ(alloc.stats().bytes_in_use, size_t(5) << 20);
  EXPECT_THROW(alloc.allocate(4 << 20), OutOfMemory);  // nothing cached left to give back
  EXPECT_EQ(alloc.stats().bytes_in_use, size_t(5) << 20);
}

// CUDA graphs' private pools: blocks taken while a pool is active come back to that pool only, so
// nothing a graph replays into is handed to other work while the pool lives.
TEST(CachingAllocator, PrivatePoolKeepsItsBlocksUntilReleased) {
  SmallDevice dev(64 << 20);
  CachingAllocator alloc(dev);
  { auto warm = alloc.allocate(4096); }  // a shared free block of the 4 KiB class
  ASSERT_EQ(alloc.stats().bytes_cached, 4096u);
  auto before = alloc.allocate(1024);  // made before the capture, last used inside it
  void* before_addr = before.get();
  const PoolId pool = alloc.create_pool();
  std::shared_ptr<void> out;  // a captured output, held by the graph
  void* scratch_addr = nullptr;
  {
    PoolScope scope(alloc, pool);
    EXPECT_EQ(alloc.active_pool(), pool);
    auto scratch = alloc.allocate(4096);  // not the shared free block: a new one of the pool
    scratch_addr = scratch.get();
    EXPECT_EQ(alloc.stats().bytes_cached, 4096u);
    EXPECT_EQ(alloc.stats().raw_allocations, 3u);
    out = alloc.allocate(512);
    before.reset();  // a shared block freed during the capture: kept aside, not reused
    EXPECT_EQ(alloc.stats().bytes_in_pools, 1024u);
    auto next = alloc.allocate(1024);
    EXPECT_NE(next.get(), before_addr);
    next.reset();
    scratch.reset();  // freed inside the capture: back to the pool ...
    EXPECT_EQ(alloc.stats().bytes_in_pools, 4096u + 1024u + 1024u);
    EXPECT_EQ(alloc.stats().bytes_cached, 4096u);
    auto again = alloc.allocate(4096);  // ... and reused by the same capture
    EXPECT_EQ(again.get(), scratch_addr);
    EXPECT_EQ(alloc.stats().raw_allocations, 5u);
  }
  EXPECT_EQ(alloc.active_pool(), 0u);
  EXPECT_EQ(alloc.stats().bytes_in_pools, 4096u + 1024u + 1024u);
  // After the capture the pool's blocks are never handed out: a request of their class takes
  // the shared free block.
  auto other = alloc.allocate(4096);
  EXPECT_NE(other.get(), scratch_addr);
  EXPECT_EQ(alloc.stats().raw_allocations, 5u);
  auto other_small = alloc.allocate(1024);  // a new block: `before` stays aside
  EXPECT_NE(other_small.get(), before_addr);
  EXPECT_EQ(alloc.stats().raw_allocations, 6u);
  other.reset();
  other_small.reset();
  alloc.release_cached();  // an OOM retry gives back shared blocks only
  EXPECT_EQ(alloc.stats().bytes_cached, 0u);
  EXPECT_EQ(alloc.stats().bytes_in_pools, 4096u + 1024u + 1024u);
  // The graph goes away: the pool's free blocks go back to the device, the block kept aside is
  // shared again, and the output still held joins the shared lists when its holder lets go.
  alloc.release_pool(pool);
  EXPECT_EQ(alloc.stats().bytes_in_pools, 0u);
  EXPECT_EQ(alloc.stats().bytes_cached, 1024u);
  EXPECT_EQ(alloc.stats().bytes_in_use, 512u);
  out.reset();
  EXPECT_EQ(alloc.stats().bytes_cached, 1024u + 512u);
  EXPECT_THROW(alloc.begin_pool(pool), Error);  // released
}

TEST(CachingAllocator, OnePoolActiveAtATime) {
  SmallDevice dev(1 << 20);
  CachingAllocator alloc(dev);
  const PoolId a = alloc.create_pool(), b = alloc.create_pool();
  EXPECT_NE(a, b);
  PoolScope scope(alloc, a);
  EXPECT_THROW(alloc.begin_pool(b), Error);
  EXPECT_EQ(alloc.active_pool(), a);
}

TEST(CachingAllocator, SizeClasses) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  size_t r = CachingAllocator::round_size((3u << 20) + 1);
  EXPECT_GE(r, (3u << 20) + 1);
  EXPECT_LE(r, ((3u << 20) + 1) * 9 / 8);
}

TEST(Checks, MessagesNameOpArgumentAndShapes) {
  Tensor w = Tensor::zeros({63}, DType::F32);
  try {
    check_shape("rmsnorm_forward", "w", w, {64});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rmsnorm_forward: argument 'w' is f32[63]@cpu, expected shape [64]");
  }
  Tensor x = Tensor::zeros({2, 3}, DType::F64);
  EXPECT_THROW(check_float_args("op", {{"x", &x}, {"w", &w}}), Error);
  EXPECT_THROW(check_shape("op", "x", x, {2, kAny, 1}), Error);
  EXPECT_NO_THROW(check_shape("op", "x", x, {2, kAny}));
}

TEST(Backend, CudaDeviceIsAClearErrorWithoutAGpu) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present";
  try {
    Tensor::empty({4}, DType::F32, Device::CUDA);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device 'cuda' requested"), std::string::npos);
  }
}

}  // namespace
}  // namespace amor

namespace amor {
namespace {

// On a machine with a GPU (the H200 runs of this suite), data survives a round trip through the
// CUDA backend and the caching allocator reuses device blocks too.
TEST(Backend, CudaRoundTripWhenAGpuIsPresent) {
  if (!cuda_available()) GTEST_SKIP() << "no GPU on this machine";
  Tensor h = Tensor::from_vector<float>({5}, {1, -2, 3.5f, 4, 1e-3f});
  Tensor d = h.to(Device::CUDA);
  EXPECT_EQ(d.str(), "f32[5]@cuda");
  Tensor d2 = d.clone();
  EXPECT_EQ(d2.to(Device::CPU).to_vector<float>(), h.to_vector<float>());
  Tensor z = Tensor::zeros({7}, DType::BF16, Device::CUDA);
  EXPECT_EQ(z.to(Device::CPU).to(DType::F32).to_vector<float>(), std::vector<float>(7, 0.0f));
  { Tensor first = Tensor::empty({5}, DType::F32, Device::CUDA); }
  size_t raw = allocator(Device::CUDA).stats().raw_allocations;
  { Tensor again = Tensor::empty({5}, DType::F32, Device::CUDA); }
  EXPECT_EQ(allocator(Device::CUDA).stats().raw_allocations, raw);  // served from the cache
}

}  // namespace
}  // namespace amor
