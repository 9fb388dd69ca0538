// NcclCommunicator under mpirun, one GPU per rank (CUDA builds on a GPU machine; elsewhere the
// tests skip and say why): every collective on CUDA tensors against values computed here from the
// rank numbers, the host-scalar folds and broadcasts staged through the GPU, the input checks,
// and Fsdp refusing a model whose parameters are not on the communicator's device.
#include <chrono>

#include "runner/dist/dist_test_support.h"

#ifdef AMOR_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/core/backend.h"
#include "runner/dist/nccl_communicator.h"
#endif

namespace amor::dist {
namespace {

using namespace testing;

#ifdef AMOR_HAVE_CUDA

#define NCCL_OR_SKIP(c, ...)                                                             \
  auto c = make_nccl_comm(__VA_ARGS__);                                                  \
  if (!c) GTEST_SKIP() << "NCCL needs one GPU per rank; this machine has too few for "  \
                       << world_size() << " ranks"

Tensor on_gpu(const Tensor& t) { return t.to(Device::CUDA); }

TEST(NcclCommunicator, AllGatherAndPrefetch) {
  NCCL_OR_SKIP(c);
  const int W = c->size(), r = c->rank();
  for (DType dt : {DType::F32, DType::F64, DType::I64}) {
    Tensor host = Tensor::empty({3}, dt);
    for (int64_t i = 0; i < 3; ++i) host.set_item(i, 10 * r + i);
    Tensor full = Tensor::zeros({3 * W}, dt, Device::CUDA);
    c->all_gather(on_gpu(host), full);
    Tensor back = full.to(Device::CPU);
    for (int q = 0; q < W; ++q)
      for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(back.item(3 * q + i), 10 * q + i) << dtype_name(dt);
  }
  Tensor shard = on_gpu(Tensor::full<float>({1000}, static_cast<float>(r) + 0.5f));
  Tensor full = Tensor::zeros({1000 * W}, DType::F32, Device::CUDA);
  auto pending = c->all_gather_start(shard, full);
  pending->wait();
  Tensor back = full.to(Device::CPU);
  for (int q = 0; q < W; ++q) EXPECT_EQ(back.item(1000 * q + 999), q + 0.5);
}

TEST(NcclCommunicator, ReduceScatterAndAllReduce) {
  NCCL_OR_SKIP(c);
  const int W = c->size(), r = c->rank();
  const int64_t n = 4;
  Tensor full = Tensor::empty({n * W}, DType::F64);
  for (int64_t j = 0; j < n * W; ++j) full.set_item(j, (r + 1) * (j + 1));
  Tensor shard = Tensor::zeros({n}, DType::F64, Device::CUDA);
  c->reduce_scatter(on_gpu(full), shard);
  Tensor s = shard.to(Device::CPU);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(s.item(i), (r * n + i + 1) * W * (W + 1) / 2.0);
  Tensor t = on_gpu(Tensor::from_vector<float>({2}, {static_cast<float>(r), -static_cast<float>(r)}));
  c->all_reduce(t, ReduceOp::Max);
  Tensor tb = t.to(Device::CPU);
  EXPECT_EQ(tb.item(0), W - 1);
  EXPECT_EQ(tb.item(1), 0);
  EXPECT_EQ(c->all_reduce_sum(int64_t{r + 1}), int64_t{W} * (W + 1) / 2);
  EXPECT_EQ(c->all_reduce_sum(0.25 * r), 0.25 * W * (W - 1) / 2);
  EXPECT_EQ(c->all_reduce_max(int64_t{r}), W - 1);
}

TEST(NcclCommunicator, BroadcastAndBarrier) {
  NCCL_OR_SKIP(c);
  const int root = c->size() - 1;
  Tensor t = on_gpu(Tensor::full<double>({5}, c->rank()));
  c->broadcast(t, root);
  EXPECT_EQ(t.to(Device::CPU).item(4), root);
  EXPECT_EQ(c->broadcast_string(c->rank() == root ? "nccl root" : "", root), "nccl root");
  c->barrier();
}

TEST(NcclCommunicator, BadArgumentsAreNamed) {
  NCCL_OR_SKIP(c);
  const int W = c->size();
  Tensor cpu = Tensor::zeros({2}, DType::F32);
  Tensor full = Tensor::zeros({2 * W}, DType::F32, Device::CUDA);
  std::string err = error_of([&] { c->all_gather(cpu, full); });
  EXPECT_NE(err.find("nccl all_gather: shard is f32[2]@cpu; the NCCL communicator works on cuda tensors"),
            std::string::npos)
      << err;
  Tensor ints = Tensor::zeros({2}, DType::I64, Device::CUDA);
  err = error_of([&] { c->all_reduce(ints, ReduceOp::Sum); });
  EXPECT_NE(err.find("nccl all_reduce: reductions take f32 or f64 tensors"), std::string::npos) << err;
  Tensor wrong = Tensor::zeros({2 * W + 1}, DType::F32, Device::CUDA);
  Tensor gshard = Tensor::zeros({2}, DType::F32, Device::CUDA);
  err = error_of([&] { c->all_gather(gshard, wrong); });
  EXPECT_NE(err.find(fmt::format("ranks x shard")), std::string::npos) << err;
  // Fsdp over NCCL shards a model on the GPU; a cpu model is refused by name.
  auto m = build(tiny("transformer"), DType::F32, 1);
  err = error_of([&] { Fsdp f(*m, *c); });
  EXPECT_NE(err.find("fsdp: parameter 'embed_tokens.weight' is f32[13,8]@cpu but the nccl communicator works on "
                     "cuda tensors"),
            std::string::npos)
      << err;
  c->barrier();
}

TEST(NcclCommunicator, APeerThatNeverArrivesTimesOutAndAbortsTheCommunicator) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  NCCL_OR_SKIP(c, /*timeout_s=*/2.0);
  if (c->rank() == 0) {
    // The others never join this barrier: the watchdog ends it and aborts the NCCL communicator.
    const auto t0 = std::chrono::steady_clock::now();
    std::string err = error_of([&] { c->barrier(); });
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(err.find(fmt::format("nccl all_reduce failed on rank 0 of {}", c->size())), std::string::npos) << err;
    EXPECT_NE(err.find("no completion after"), std::string::npos) << err;
    EXPECT_NE(err.find("(AMOR_COMM_TIMEOUT_S=2): a peer rank has died or is stuck"), std::string::npos) << err;
    EXPECT_LT(waited, 10.0);
    err = error_of([&] { c->barrier(); });
    EXPECT_NE(err.find("the communicator is broken since an earlier failure"), std::string::npos) << err;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // The others' communicators: their finalize cannot complete with rank 0 gone; the watchdog ends
  // it (aborting) within the timeout, so destruction returns.
  const auto t0 = std::chrono::steady_clock::now();
  c.reset();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  MPI_Barrier(MPI_COMM_WORLD);
}

#else

TEST(NcclCommunicator, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA (AMOR_HAVE_CUDA): no NCCL"; }

#endif

}  // namespace
}  // namespace amor::dist

int main(int argc, char** argv) { return amor::dist::testing::mpi_gtest_main(argc, argv); }
