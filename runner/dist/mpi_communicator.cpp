// MpiCommunicator: non-blocking MPI collectives completed under a timeout watchdog.
#include "runner/dist/mpi_communicator.h"

#include <chrono>
#include <climits>
#include <thread>

#include "kernels/core/error.h"
#include "runner/dist/rank_fold.h"

namespace amor::dist {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::BF16:
    case DType::F16: return MPI_UINT16_T;  // moved, never reduced
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::U8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, static_cast<size_t>(len));
}

void check_cpu(const char* op, const char* name, const Tensor& t) {
  AMOR_CHECK(t.defined(), "mpi {}: {} is undefined", op, name);
  AMOR_CHECK(t.is_cpu(), "mpi {}: {} is {}; the MPI communicator works on cpu tensors", op, name,
             t.str());
}

int count_of(const char* op, int64_t n) {
  AMOR_CHECK(n <= INT_MAX, "mpi {}: {} elements exceed MPI's int count; split the unit", op, n);
  return static_cast<int>(n);
}

// The full/shard pair of all_gather and reduce_scatter: one dtype, full = W x shard.
void check_pair(const char* op, const Tensor& shard, const Tensor& full, int world) {
  check_cpu(op, "shard", shard);
  check_cpu(op, "full", full);
  AMOR_CHECK(shard.dtype() == full.dtype(), "mpi {}: shard is {} but full is {}", op, shard.str(),
             full.str());
  AMOR_CHECK(full.numel() == shard.numel() * world,
             "mpi {}: full is {} but {} ranks x shard {} need {} elements", op, full.str(), world,
             shard.str(), shard.numel() * world);
}

void check_reducible(const char* op, const Tensor& t) {
  AMOR_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64,
             "mpi {}: reductions take f32 or f64 tensors, got {}", op, t.str());
}

}  // namespace

// An all-gather in flight; completes through the communicator's watchdog.
class MpiPending final : public PendingCollective {
 public:
  MpiPending(MpiCommunicator& c, MPI_Request r, std::vector<Tensor> keep)
      : comm_(c), req_(r), keep_(std::move(keep)) {}
  ~MpiPending() override {
    if (req_ == MPI_REQUEST_NULL) return;
    if (!comm_.broken_.empty()) {  // never to complete: park the buffers MPI may still write
      for (auto& t : keep_) comm_.abandoned_.push_back(std::move(t));
      return;
    }
    try {
      wait();
    } catch (const Error&) {
      // A destructor cannot throw: the communicator is now broken and says so on its next call.
    }
  }
  void wait() override {
    if (req_ == MPI_REQUEST_NULL) return;
    comm_.wait(req_, "all_gather (prefetch)", std::move(keep_));
    req_ = MPI_REQUEST_NULL;
  }

 private:
  MpiCommunicator& comm_;
  MPI_Request req_;
  std::vector<Tensor> keep_;
};

MpiCommunicator::MpiCommunicator(MPI_Comm comm, double timeout_s)
    : timeout_s_(timeout_s > 0 ? timeout_s : comm_timeout_seconds()) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  AMOR_CHECK(initialized, "MpiCommunicator: MPI is not initialised (call MPI_Init first)");
  AMOR_CHECK(comm != MPI_COMM_NULL, "MpiCommunicator: given MPI_COMM_NULL");
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  // Duplicated without blocking, so a peer that never arrives is caught by the watchdog too.
  MPI_Request req;
  int rc = MPI_Comm_idup(comm, &comm_, &req);
  if (rc != MPI_SUCCESS) fail("comm_dup", mpi_error_string(rc), {});
  wait(req, "comm_dup", {});
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // A broken communicator has a collective that will never finish; freeing it could block.
  if (!finalized && broken_.empty() && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::check_healthy(const char* op) const {
  AMOR_CHECK(broken_.empty(),
             "mpi {} on rank {} of {}: the communicator is broken since an earlier failure ({}); "
             "the run must abort",
             op, rank_, size_, broken_);
}

void MpiCommunicator::fail(const char* op, const std::string& why, std::vector<Tensor> keep) {
  for (auto& t : keep) abandoned_.push_back(std::move(t));
  std::string msg = fmt::format("mpi {} failed on rank {} of {}: {}", op, rank_, size_, why);
  if (broken_.empty()) broken_ = msg;
  record_comm_failure(msg);
  throw Error(msg);
}

void MpiCommunicator::wait(MPI_Request& req, const char* op, std::vector<Tensor> keep) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  for (int polls = 0;; ++polls) {
    int done = 0;
    const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
      fail(op, mpi_error_string(rc) + " (a peer rank has probably died)", std::move(keep));
    if (done) return;
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (waited > timeout_s_)
      fail(op,
           fmt::format("no completion after {:.1f} s (AMOR_COMM_TIMEOUT_S={}): a peer rank has "
                       "died or is stuck",
                       waited, timeout_s_),
           std::move(keep));
    if (polls < 2000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void MpiCommunicator::all_gather(const Tensor& shard, Tensor& full) {
  all_gather_start(shard, full)->wait();
}

std::unique_ptr<PendingCollective> MpiCommunicator::all_gather_start(const Tensor& shard, Tensor& full) {
  const char* op = "all_gather";
  check_healthy(op);
  check_pair(op, shard, full, size_);
  const int n = count_of(op, shard.numel());
  const MPI_Datatype t = mpi_type(shard.dtype());
  MPI_Request req;
  const int rc = MPI_Iallgather(shard.raw_data(), n, t, full.raw_data(), n, t, comm_, &req);
  if (rc != MPI_SUCCESS) fail(op, mpi_error_string(rc), {shard, full});
  return std::make_unique<MpiPending>(*this, req, std::vector<Tensor>{shard, full});
}

void MpiCommunicator::reduce_scatter(const Tensor& full, Tensor& shard) {
  const char* op = "reduce_scatter";
  check_healthy(op);
  check_pair(op, shard, full, size_);
  check_reducible(op, full);
  const int n = count_of(op, shard.numel());
  MPI_Request req;
  const int rc = MPI_Ireduce_scatter_block(full.raw_data(), shard.raw_data(), n,
                                           mpi_type(full.dtype()), MPI_SUM, comm_, &req);
  if (rc != MPI_SUCCESS) fail(op, mpi_error_string(rc), {full, shard});
  wait(req, op, {full, shard});
}

void MpiCommunicator::all_reduce(Tensor& t, ReduceOp rop) {
  const char* op = "all_reduce";
  check_healthy(op);
  check_cpu(op, "tensor", t);
  check_reducible(op, t);
  MPI_Request req;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), count_of(op, t.numel()),
                                mpi_type(t.dtype()), rop == ReduceOp::Sum ? MPI_SUM : MPI_MAX,
                                comm_, &req);
  if (rc != MPI_SUCCESS) fail(op, mpi_error_string(rc), {t});
  wait(req, op, {t});
}

void MpiCommunicator::all_reduce(double* values, int64_t n, ReduceOp op) {
  Tensor mine = Tensor::from_vector<double>({n}, std::vector<double>(values, values + n));
  Tensor all = Tensor::empty({n * size_}, DType::F64);
  all_gather(mine, all);
  fold_in_rank_order(all.data<double>(), values, n, size_, op);
}

void MpiCommunicator::all_reduce(int64_t* values, int64_t n, ReduceOp op) {
  Tensor mine = Tensor::from_vector<int64_t>({n}, std::vector<int64_t>(values, values + n));
  Tensor all = Tensor::empty({n * size_}, DType::I64);
  all_gather(mine, all);
  fold_in_rank_order(all.data<int64_t>(), values, n, size_, op);
}

void MpiCommunicator::broadcast(Tensor& t, int root) {
  const char* op = "broadcast";
  check_healthy(op);
  check_cpu(op, "tensor", t);
  AMOR_CHECK(root >= 0 && root < size_, "mpi broadcast: root {} is not a rank of {}", root, size_);
  MPI_Request req;
  const int rc = MPI_Ibcast(t.raw_data(), count_of(op, t.numel()), mpi_type(t.dtype()), root, comm_, &req);
  if (rc != MPI_SUCCESS) fail(op, mpi_error_string(rc), {t});
  wait(req, op, {t});
}

void MpiCommunicator::broadcast(void* bytes, size_t n, int root) {
  const char* op = "broadcast";
  check_healthy(op);
  AMOR_CHECK(root >= 0 && root < size_, "mpi broadcast: root {} is not a rank of {}", root, size_);
  MPI_Request req;
  const int rc = MPI_Ibcast(bytes, count_of(op, static_cast<int64_t>(n)), MPI_BYTE, root, comm_, &req);
  if (rc != MPI_SUCCESS) fail(op, mpi_error_string(rc), {});
  wait(req, op, {});
}

void MpiCommunicator::barrier() {
  const char* op = "barrier";
  check_healthy(op);
  MPI_Request req;
  const int rc = MPI_Ibarrier(comm_, &req);
  if (rc != MPI_SUCCESS) fail(op, mpi_error_string(rc), {});
  wait(req, op, {});
}

}  // namespace amor::dist
