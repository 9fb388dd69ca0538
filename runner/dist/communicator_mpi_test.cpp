// MpiCommunicator under mpirun at 1, 2 and 4 ranks: every collective against values computed
// here from the rank numbers, rank-order folding of host scalars, the input checks, the timeout
// watchdog (a peer that never arrives), the AMOR entropy gather with ragged counts (also of cuda
// entropies, over MPI and over NCCL where there are GPUs), and the
// AMOR_COMM_TIMEOUT_S setting.
#include <chrono>
#include <cstdlib>

#include "kernels/core/backend.h"
#include "runner/dist/dist_test_support.h"
#include "runner/dist/run_group.h"

#ifdef AMOR_HAVE_CUDA
#include <cuda_runtime.h>

#include "runner/dist/nccl_communicator.h"
#endif

namespace amor::dist {
namespace {

using namespace testing;

TEST(MpiCommunicator, AllGatherPutsEachRankShardInPlace) {
  MpiCommunicator c(MPI_COMM_WORLD);
  const int W = c.size(), r = c.rank();
  for (DType dt : {DType::F32, DType::F64, DType::I64, DType::U8}) {
    Tensor shard = Tensor::empty({3}, dt);
    for (int64_t i = 0; i < 3; ++i) shard.set_item(i, 10 * r + i);
    Tensor full = Tensor::empty({3 * W}, dt);
    c.all_gather(shard, full);
    for (int q = 0; q < W; ++q)
      for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(full.item(3 * q + i), 10 * q + i) << dtype_name(dt);
  }
  // bf16 moves bit for bit (it is never reduced).
  Tensor shard = Tensor::from_vector<bf16>({2}, {bf16(0.5f + static_cast<float>(r)), bf16(-3.25f)});
  Tensor full = Tensor::empty({2 * W}, DType::BF16);
  c.all_gather(shard, full);
  for (int q = 0; q < W; ++q) {
    EXPECT_EQ(static_cast<float>(full.data<bf16>()[2 * q]), 0.5f + static_cast<float>(q));
    EXPECT_EQ(static_cast<float>(full.data<bf16>()[2 * q + 1]), -3.25f);
  }
}

TEST(MpiCommunicator, AllGatherStartCompletesAtWait) {
  MpiCommunicator c(MPI_COMM_WORLD);
  const int W = c.size();
  Tensor shard = Tensor::full<double>({4}, c.rank() + 0.5);
  Tensor full = Tensor::zeros({4 * W}, DType::F64);
  auto pending = c.all_gather_start(shard, full);
  c.barrier();  // another collective may run while the gather is in flight
  pending->wait();
  pending->wait();  // idempotent
  for (int q = 0; q < W; ++q)
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(full.item(4 * q + i), q + 0.5);
}

TEST(MpiCommunicator, ReduceScatterSumsEachBlockIntoItsRank) {
  MpiCommunicator c(MPI_COMM_WORLD);
  const int W = c.size(), r = c.rank();
  const int64_t n = 5;
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor full = Tensor::empty({n * W}, dt);
    for (int64_t j = 0; j < n * W; ++j) full.set_item(j, (r + 1) * (j + 1));
    Tensor shard = Tensor::empty({n}, dt);
    c.reduce_scatter(full, shard);
    // sum over q of (q+1)(j+1) = (j+1) W(W+1)/2, small integers: exact in any order.
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(shard.item(i), (r * n + i + 1) * W * (W + 1) / 2.0);
  }
}

TEST(MpiCommunicator, AllReduceSumsAndMaxes) {
  MpiCommunicator c(MPI_COMM_WORLD);
  const int W = c.size(), r = c.rank();
  Tensor t = Tensor::from_vector<double>({2}, {static_cast<double>(r), -static_cast<double>(r)});
  c.all_reduce(t, ReduceOp::Sum);
  EXPECT_EQ(t.item(0), W * (W - 1) / 2.0);
  Tensor m = Tensor::from_vector<float>({2}, {static_cast<float>(r), -static_cast<float>(r)});
  c.all_reduce(m, ReduceOp::Max);
  EXPECT_EQ(m.item(0), W - 1);
  EXPECT_EQ(m.item(1), 0);
  EXPECT_EQ(c.all_reduce_sum(int64_t{r + 1}), int64_t{W} * (W + 1) / 2);
  EXPECT_EQ(c.all_reduce_max(int64_t{r == W - 1 ? 7 : 0}), 7);
}

TEST(MpiCommunicator, HostScalarsAreFoldedInRankOrderOnEveryRank) {
  MpiCommunicator c(MPI_COMM_WORLD);
  const int W = c.size(), r = c.rank();
  // Values whose sum depends on the order: the result must be the rank-order fold, everywhere.
  auto value = [](int q) { return q % 2 == 0 ? 1e16 * (q + 1) : 1.0 + q / 3.0; };
  double expect = value(0);
  for (int q = 1; q < W; ++q) expect += value(q);
  double v[2] = {value(r), -2.0 * r};
  c.all_reduce(v, 2, ReduceOp::Sum);
  EXPECT_EQ(v[0], expect);
  EXPECT_EQ(v[1], -1.0 * W * (W - 1));
  double mx = static_cast<double>(r);
  c.all_reduce(&mx, 1, ReduceOp::Max);
  EXPECT_EQ(mx, W - 1);
}

TEST(MpiCommunicator, BroadcastFromTheLastRank) {
  MpiCommunicator c(MPI_COMM_WORLD);
  const int W = c.size(), root = W - 1;
  Tensor t = Tensor::full<float>({3}, static_cast<float>(c.rank()));
  c.broadcast(t, root);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(t.item(i), root);
  const std::string s = c.broadcast_string(c.rank() == root ? "from the root" : "", root);
  EXPECT_EQ(s, "from the root");
  EXPECT_EQ(c.broadcast_string("", 0), "");
  int64_t x = c.rank() == root ? 42 : 0;
  c.broadcast(&x, sizeof x, root);
  EXPECT_EQ(x, 42);
  c.barrier();
}

TEST(MpiCommunicator, BadArgumentsAreNamed) {
  MpiCommunicator c(MPI_COMM_WORLD);
  const int W = c.size();
  Tensor shard = Tensor::zeros({3}, DType::F32);
  Tensor wrong = Tensor::zeros({3 * W + 1}, DType::F32);
  std::string err = error_of([&] { c.all_gather(shard, wrong); });
  EXPECT_NE(err.find(fmt::format("mpi all_gather: full is f32[{}]@cpu but {} ranks x shard", 3 * W + 1, W)),
            std::string::npos)
      << err;
  Tensor f64 = Tensor::zeros({3 * W}, DType::F64);
  err = error_of([&] { c.reduce_scatter(f64, shard); });
  EXPECT_NE(err.find("mpi reduce_scatter: shard is f32[3]@cpu but full is f64"), std::string::npos) << err;
  Tensor ints = Tensor::zeros({2}, DType::I64);
  err = error_of([&] { c.all_reduce(ints, ReduceOp::Sum); });
  EXPECT_NE(err.find("mpi all_reduce: reductions take f32 or f64 tensors, got i64[2]@cpu"), std::string::npos)
      << err;
  err = error_of([&] { c.broadcast(shard, W); });
  EXPECT_NE(err.find(fmt::format("mpi broadcast: root {} is not a rank of {}", W, W)), std::string::npos) << err;
  Tensor undefined;
  err = error_of([&] { c.all_gather(undefined, wrong); });
  EXPECT_NE(err.find("mpi all_gather: shard is undefined"), std::string::npos) << err;
  err = error_of([&] { MpiCommunicator bad(MPI_COMM_NULL); });
  EXPECT_NE(err.find("MpiCommunicator: given MPI_COMM_NULL"), std::string::npos) << err;
  c.barrier();  // none of the above reached MPI: the communicator is still in step
}

TEST(MpiCommunicator, APeerThatNeverArrivesTimesOutAndBreaksTheCommunicator) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  MpiCommunicator c(MPI_COMM_WORLD, /*timeout_s=*/0.5);
  if (c.rank() == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string err = error_of([&] { c.barrier(); });  // the others are not coming (yet)
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(err.find(fmt::format("mpi barrier failed on rank 0 of {}: no completion after", c.size())),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("AMOR_COMM_TIMEOUT_S=0.5): a peer rank has died or is stuck"), std::string::npos) << err;
    EXPECT_GE(waited, 0.5);
    EXPECT_LT(waited, 5.0);
    err = error_of([&] { c.barrier(); });
    EXPECT_NE(err.find("the communicator is broken since an earlier failure"), std::string::npos) << err;
    EXPECT_FALSE(c.broken().empty());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // The others now join rank 0's abandoned barrier, which rank 0 progresses inside MPI_Barrier,
  // so nothing is left pending at MPI_Finalize.
  if (c.rank() != 0) c.barrier();
  MPI_Barrier(MPI_COMM_WORLD);
}

// The run group over comm (what a model's collectives go through), values on `dev`: ragged counts (rank r holds r+1 values, given as a
// [1, r+1] tensor: any shape comes back flat) concatenated in rank order, in the dtype and on the
// device they came in; a rank holding nothing; a bad dtype named; sums the same on every rank.
void check_entropy_gather(Communicator& c, Device dev) {
  const int W = c.size(), r = c.rank();
  CommRunGroup group(c);
  EXPECT_EQ(group.size(), W);
  auto gather = [&](const Tensor& t) { return group.gather_flat(t); };
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor local = Tensor::empty({1, r + 1}, dt);  // rank r holds r+1 values
    for (int64_t i = 0; i <= r; ++i) local.set_item(i, 0.25 * r + 0.0625 * i);
    Tensor all = gather(local.to(dev));
    ASSERT_EQ(all.shape(), (Shape{int64_t{W} * (W + 1) / 2}));
    EXPECT_EQ(all.dtype(), dt);
    EXPECT_EQ(all.device(), dev);
    Tensor host = all.to(Device::CPU);
    int64_t at = 0;
    for (int q = 0; q < W; ++q)
      for (int64_t i = 0; i <= q; ++i) EXPECT_EQ(host.item(at++), 0.25 * q + 0.0625 * i);
  }
  // Equal counts: no padding to drop.
  Tensor same = gather(Tensor::full<float>({3}, static_cast<float>(r)).to(dev));
  ASSERT_EQ(same.numel(), 3 * W);
  EXPECT_EQ(same.to(Device::CPU).item(3 * W - 1), W - 1);
  Tensor none = Tensor::empty({0}, DType::F64, dev);  // a rank may hold nothing
  Tensor all = gather(r == 0 ? Tensor::full<double>({2}, 0.5).to(dev) : none);
  ASSERT_EQ(all.numel(), 2);
  EXPECT_EQ(all.to(Device::CPU).item(1), 0.5);
  std::string err = error_of([&] { gather(Tensor::zeros({2}, DType::I32)); });
  EXPECT_NE(err.find("gather_flat: expected an f32/f64 tensor, got i32[2]@cpu"), std::string::npos) << err;
  std::vector<double> sums{1.0, static_cast<double>(r), 0.5};
  group.sum(sums);
  EXPECT_EQ(sums, (std::vector<double>{static_cast<double>(W), W * (W - 1) / 2.0, 0.5 * W}));
}

TEST(EntropyGather, ConcatenatesRaggedCountsInRankOrder) {
  MpiCommunicator c(MPI_COMM_WORLD);
  check_entropy_gather(c, Device::CPU);
}

// Entropies on the GPU (the gate's device in a cuda run) over MPI: staged through the host, given
// back on the GPU.
TEST(EntropyGather, CudaEntropiesOverMpi) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  MpiCommunicator c(MPI_COMM_WORLD);
  check_entropy_gather(c, Device::CUDA);
}

#ifdef AMOR_HAVE_CUDA
// Over NCCL the entropies stay on the GPU (one GPU per rank; skipped with fewer).
TEST(EntropyGather, CudaEntropiesOverNccl) {
  auto c = make_nccl_comm();
  if (!c) GTEST_SKIP() << "NCCL needs one GPU per rank";
  check_entropy_gather(*c, Device::CUDA);
}
#endif

TEST(CommTimeout, ReadsAmorCommTimeoutS) {
  const char* saved = std::getenv("AMOR_COMM_TIMEOUT_S");
  const std::string keep = saved ? saved : "";
  unsetenv("AMOR_COMM_TIMEOUT_S");
  EXPECT_EQ(comm_timeout_seconds(), 300.0);
  setenv("AMOR_COMM_TIMEOUT_S", "2.5", 1);
  EXPECT_EQ(comm_timeout_seconds(), 2.5);
  for (const char* bad : {"fast", "0", "-3", "5s", "inf"}) {
    setenv("AMOR_COMM_TIMEOUT_S", bad, 1);
    std::string err = error_of([] { comm_timeout_seconds(); });
    EXPECT_NE(err.find(fmt::format("AMOR_COMM_TIMEOUT_S: '{}' is not a positive number of seconds", bad)),
              std::string::npos)
        << err;
  }
  setenv("AMOR_COMM_TIMEOUT_S", "7", 1);
  MpiCommunicator c(MPI_COMM_WORLD);
  EXPECT_EQ(c.timeout_seconds(), 7.0);
  if (saved)
    setenv("AMOR_COMM_TIMEOUT_S", keep.c_str(), 1);
  else
    unsetenv("AMOR_COMM_TIMEOUT_S");
}

}  // namespace
}  // namespace amor::dist

int main(int argc, char** argv) { return amor::dist::testing::mpi_gtest_main(argc, argv); }
