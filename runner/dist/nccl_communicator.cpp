// NcclCommunicator: non-blocking NCCL communicator, collectives on a side stream, and a watchdog
// over ncclCommGetAsyncError and the clock. Compiled only in CUDA builds.
#ifdef AMOR_HAVE_CUDA
#include "runner/dist/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/core/error.h"
#include "runner/dist/mpi_communicator.h"
#include "runner/dist/rank_fold.h"

namespace amor::dist {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::U8: return ncclUint8;
  }
  return ncclUint8;
}

}  // namespace

struct NcclCommunicator::Impl {
  int rank = 0, size = 1, device = 0;
  double timeout_s = 300;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t inputs_ready = nullptr;
  std::string broken;
  std::vector<Tensor> abandoned;  // buffers of collectives given up on (NCCL may still write them)

  [[noreturn]] void fail(const char* op, const std::string& why, std::vector<Tensor> keep = {}) {
    for (auto& t : keep) abandoned.push_back(std::move(t));
    std::string msg = fmt::format("nccl {} failed on rank {} of {} (cuda device {}): {}", op, rank, size,
                                  device, why);
    if (broken.empty()) {
      broken = msg;
      // Frees the peers' kernels waiting on us and ours waiting on them; later calls throw.
      if (comm != nullptr) ncclCommAbort(comm);
      comm = nullptr;
    }
    record_comm_failure(msg);
    throw Error(msg);
  }

  void check_healthy(const char* op) const {
    AMOR_CHECK(broken.empty(),
               "nccl {} on rank {} of {}: the communicator is broken since an earlier failure ({}); "
               "the run must abort",
               op, rank, size, broken);
  }

  std::string nccl_error(ncclResult_t rc) const {
    std::string s = ncclGetErrorString(rc);
    if (comm != nullptr) {
      const char* last = ncclGetLastError(comm);
      if (last != nullptr && *last != '\0') s += std::string(": ") + last;
    }
    return s;
  }

  // Polls until done() says so; between polls the communicator's async error and the clock.
  template <class Done>
  void watch(const char* op, Done done, std::vector<Tensor>& keep) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    for (int polls = 0;; ++polls) {
      if (done()) return;
      ncclResult_t async = ncclSuccess;
      ncclResult_t rc = ncclCommGetAsyncError(comm, &async);
      if (rc != ncclSuccess) fail(op, "ncclCommGetAsyncError: " + nccl_error(rc), std::move(keep));
      if (async != ncclSuccess && async != ncclInProgress)
        fail(op, nccl_error(async) + " (a peer rank has probably died)", std::move(keep));
      const double waited = std::chrono::duration<double>(clock::now() - start).count();
      if (waited > timeout_s)
        fail(op,
             fmt::format("no completion after {:.1f} s (AMOR_COMM_TIMEOUT_S={}): a peer rank has died "
                         "or is stuck",
                         waited, timeout_s),
             std::move(keep));
      if (polls < 2000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // A non-blocking communicator's calls may return ncclInProgress: wait until the call settled.
  void settle(const char* op, ncclResult_t rc, std::vector<Tensor>& keep) {
    if (rc != ncclSuccess && rc != ncclInProgress) fail(op, nccl_error(rc), std::move(keep));
    watch(op, [&] {
      ncclResult_t st = ncclSuccess;
      ncclCommGetAsyncError(comm, &st);
      return st != ncclInProgress;
    }, keep);
  }

  // Orders the side stream after everything already queued on the default stream.
  void order_after_default(const char* op) {
    cudaError_t e = cudaEventRecord(inputs_ready, cudaStreamLegacy);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, inputs_ready, 0);
    if (e != cudaSuccess) fail(op, std::string("cuda: ") + cudaGetErrorString(e));
  }

  // Waits for the event recorded after the collective on the side stream.
  void wait_event(const char* op, cudaEvent_t ev, std::vector<Tensor>& keep) {
    watch(op, [&] {
      const cudaError_t e = cudaEventQuery(ev);
      if (e == cudaErrorNotReady) return false;
      if (e != cudaSuccess) fail(op, std::string("cuda: ") + cudaGetErrorString(e), std::move(keep));
      return true;
    }, keep);
  }

  // Enqueues one collective (launch returns its ncclResult_t) and returns the completion event.
  template <class Launch>
  cudaEvent_t enqueue(const char* op, Launch launch, std::vector<Tensor>& keep) {
    check_healthy(op);
    AMOR_CHECK(cudaSetDevice(device) == cudaSuccess, "nccl {}: cannot select cuda device {}", op, device);
    order_after_default(op);
    settle(op, launch(), keep);
    cudaEvent_t done = nullptr;
    cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(done, stream);
    if (e != cudaSuccess) fail(op, std::string("cuda: ") + cudaGetErrorString(e), std::move(keep));
    return done;
  }

  template <class Launch>
  void run(const char* op, Launch launch, std::vector<Tensor> keep) {
    cudaEvent_t done = enqueue(op, launch, keep);
    wait_event(op, done, keep);
    cudaEventDestroy(done);
  }

  void check_tensor(const char* op, const char* name, const Tensor& t) const {
    AMOR_CHECK(t.defined(), "nccl {}: {} is undefined", op, name);
    AMOR_CHECK(t.device() == Device::CUDA, "nccl {}: {} is {}; the NCCL communicator works on cuda tensors",
               op, name, t.str());
  }

  void check_pair(const char* op, const Tensor& shard, const Tensor& full) const {
    check_tensor(op, "shard", shard);
    check_tensor(op, "full", full);
    AMOR_CHECK(shard.dtype() == full.dtype(), "nccl {}: shard is {} but full is {}", op, shard.str(), full.str());
    AMOR_CHECK(full.numel() == shard.numel() * size,
               "nccl {}: full is {} but {} ranks x shard {} need {} elements", op, full.str(), size,
               shard.str(), shard.numel() * size);
  }

  static void check_reducible(const char* op, const Tensor& t) {
    AMOR_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64,
               "nccl {}: reductions take f32 or f64 tensors, got {}", op, t.str());
  }
};

namespace {

class NcclPending final : public PendingCollective {
 public:
  NcclPending(NcclCommunicator::Impl& impl, cudaEvent_t done, std::vector<Tensor> keep)
      : impl_(impl), done_(done), keep_(std::move(keep)) {}
  ~NcclPending() override {
    if (done_ == nullptr) return;
    if (impl_.broken.empty()) {
      try {
        wait();
        return;
      } catch (const Error&) {
        // The communicator is broken now and says so on its next call.
      }
    }
    for (auto& t : keep_) impl_.abandoned.push_back(std::move(t));
  }
  void wait() override {
    if (done_ == nullptr) return;
    impl_.wait_event("all_gather (prefetch)", done_, keep_);
    cudaEventDestroy(done_);
    done_ = nullptr;
    keep_.clear();
  }

 private:
  NcclCommunicator::Impl& impl_;
  cudaEvent_t done_;
  std::vector<Tensor> keep_;
};

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm bootstrap, double timeout_s) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.timeout_s = timeout_s > 0 ? timeout_s : comm_timeout_seconds();
  AMOR_CHECK(cudaGetDevice(&m.device) == cudaSuccess, "nccl: no cuda device is usable on this rank");
  ncclUniqueId id{};
  {
    MpiCommunicator boot(bootstrap, m.timeout_s);
    m.rank = boot.rank();
    m.size = boot.size();
    if (m.rank == 0) {
      const ncclResult_t rc = ncclGetUniqueId(&id);
      AMOR_CHECK(rc == ncclSuccess, "nccl init on rank 0: ncclGetUniqueId: {}", ncclGetErrorString(rc));
    }
    boot.broadcast(&id, sizeof id, 0);
  }
  cudaError_t e = cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&m.inputs_ready, cudaEventDisableTiming);
  AMOR_CHECK(e == cudaSuccess, "nccl init on rank {}: cuda: {}", m.rank, cudaGetErrorString(e));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // calls return at once; the watchdog waits
  std::vector<Tensor> none;
  m.settle("init", ncclCommInitRankConfig(&m.comm, m.size, id, m.rank, &config), none);
}

NcclCommunicator::~NcclCommunicator() {
  Impl& m = *impl_;
  if (m.comm != nullptr) {
    // Finalize flushes outstanding work; bounded by the watchdog, aborting if it does not finish.
    try {
      std::vector<Tensor> none;
      m.settle("finalize", ncclCommFinalize(m.comm), none);
      ncclCommDestroy(m.comm);
    } catch (const Error&) {
      // fail() aborted the communicator already.
    }
  }
  if (m.inputs_ready != nullptr) cudaEventDestroy(m.inputs_ready);
  if (m.stream != nullptr) cudaStreamDestroy(m.stream);
}

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::size() const { return impl_->size; }
int NcclCommunicator::cuda_device() const { return impl_->device; }
const std::string& NcclCommunicator::broken() const { return impl_->broken; }

void NcclCommunicator::all_gather(const Tensor& shard, Tensor& full) { all_gather_start(shard, full)->wait(); }

std::unique_ptr<PendingCollective> NcclCommunicator::all_gather_start(const Tensor& shard, Tensor& full) {
  Impl& m = *impl_;
  const char* op = "all_gather";
  m.check_healthy(op);
  m.check_pair(op, shard, full);
  std::vector<Tensor> keep{shard, full};
  cudaEvent_t done = m.enqueue(op, [&] {
    return ncclAllGather(shard.raw_data(), full.raw_data(), static_cast<size_t>(shard.numel()),
                         nccl_type(shard.dtype()), m.comm, m.stream);
  }, keep);
  return std::make_unique<NcclPending>(m, done, std::move(keep));
}

void NcclCommunicator::reduce_scatter(const Tensor& full, Tensor& shard) {
  Impl& m = *impl_;
  const char* op = "reduce_scatter";
  m.check_healthy(op);
  m.check_pair(op, shard, full);
  Impl::check_reducible(op, full);
  m.run(op, [&] {
    return ncclReduceScatter(full.raw_data(), shard.raw_data(), static_cast<size_t>(shard.numel()),
                             nccl_type(full.dtype()), ncclSum, m.comm, m.stream);
  }, {full, shard});
}

void NcclCommunicator::all_reduce(Tensor& t, ReduceOp rop) {
  Impl& m = *impl_;
  const char* op = "all_reduce";
  m.check_healthy(op);
  m.check_tensor(op, "tensor", t);
  Impl::check_reducible(op, t);
  m.run(op, [&] {
    return ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                         rop == ReduceOp::Sum ? ncclSum : ncclMax, m.comm, m.stream);
  }, {t});
}

void NcclCommunicator::all_reduce(double* values, int64_t n, ReduceOp op) {
  Tensor mine = Tensor::from_vector<double>({n}, std::vector<double>(values, values + n)).to(Device::CUDA);
  Tensor all = Tensor::empty({n * size()}, DType::F64, Device::CUDA);
  all_gather(mine, all);
  Tensor host = all.to(Device::CPU);
  fold_in_rank_order(host.data<double>(), values, n, size(), op);
}

void NcclCommunicator::all_reduce(int64_t* values, int64_t n, ReduceOp op) {
  Tensor mine = Tensor::from_vector<int64_t>({n}, std::vector<int64_t>(values, values + n)).to(Device::CUDA);
  Tensor all = Tensor::empty({n * size()}, DType::I64, Device::CUDA);
  all_gather(mine, all);
  Tensor host = all.to(Device::CPU);
  fold_in_rank_order(host.data<int64_t>(), values, n, size(), op);
}

void NcclCommunicator::broadcast(Tensor& t, int root) {
  Impl& m = *impl_;
  const char* op = "broadcast";
  m.check_healthy(op);
  m.check_tensor(op, "tensor", t);
  AMOR_CHECK(root >= 0 && root < m.size, "nccl broadcast: root {} is not a rank of {}", root, m.size);
  m.run(op, [&] {
    return ncclBroadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                         root, m.comm, m.stream);
  }, {t});
}

void NcclCommunicator::broadcast(void* bytes, size_t n, int root) {
  if (n == 0) return;
  Tensor host = Tensor::empty({static_cast<int64_t>(n)}, DType::U8);
  std::memcpy(host.raw_data(), bytes, n);
  Tensor dev = host.to(Device::CUDA);
  broadcast(dev, root);
  Tensor back = dev.to(Device::CPU);
  std::memcpy(bytes, back.raw_data(), n);
}

void NcclCommunicator::barrier() {
  Tensor one = Tensor::zeros({1}, DType::F32, Device::CUDA);
  all_reduce(one, ReduceOp::Sum);
}

}  // namespace amor::dist
#endif  // AMOR_HAVE_CUDA
