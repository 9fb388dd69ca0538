// Shared by runner/dist's tests (header only: every .cpp under runner/ that is not a test goes
// into the amor_runner library). The *_mpi_test binaries run under mpirun at 1, 2 and 4 ranks.
//
//  - mpi_gtest_main: MPI_Init, GoogleTest with only rank 0 printing the usual report (other ranks
//    print their failures prefixed "[rank r]"), the result agreed over all ranks (77 when every
//    test skipped everywhere: CTest reports Skipped), MPI_Finalize.
//  - tiny model configs of every kind, deterministic global batches with sample ids.
//  - ReferenceTrainer: the one-rank run FSDP must reproduce: the full model, the whole global
//    batch per micro-batch, torch-exact AdamW over full parameters, global-norm clipping.
//  - ShardedTrainer: the same steps through Fsdp on this rank's slice of each micro-batch.
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/adamw/adamw.h"
#include "kernels/grad_norm/grad_norm.h"
#include "models/amor/amor_model.h"
#include "models/lm/language_model.h"
#include "runner/dist/fsdp.h"
#include "runner/dist/mpi_communicator.h"
#include "runner/dist/rank_batch.h"
#include "tests/common/random.h"
#include "tests/common/skip_status.h"
#include "tests/common/tiny_models.h"

#ifdef AMOR_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/core/backend.h"
#include "runner/dist/nccl_communicator.h"
#endif

namespace amor::dist::testing {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int w = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  return w;
}

// Non-zero ranks: only failures, each line prefixed with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                 r.line_number(), r.summary());
  }

 private:
  int rank_;
};

inline int mpi_gtest_main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  // A test that desynchronises the ranks fails in a minute instead of the default five.
  setenv("AMOR_COMM_TIMEOUT_S", "60", /*overwrite=*/0);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = world_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int rc = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  // Exit 77 (CTest: Skipped) only when every test skipped on every rank and none failed
  // (tests/common/skip_status.h); every rank returns the same status.
  int all_skipped = amor::testing::all_tests_skipped() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_skipped, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rc == 0 && all_skipped) {
    if (rank == 0) std::printf("every test skipped: exit status %d (CTest: Skipped)\n", amor::testing::kSkipExitCode);
    rc = amor::testing::kSkipExitCode;
  }
  MPI_Finalize();
  return rc;
}

// Tiny configs of every kind (as models/lm/model_gradcheck_test.cpp), with init large enough that
// every path carries signal and Oryx chunks short enough that a sequence has several.
inline model::ModelConfig tiny(const std::string& kind) {
  model::ModelConfig c = amor::testing::tiny_model(kind, /*d_model=*/8, /*n_layers=*/2, /*vocab=*/13);
  c.vocab_chunk = 5;
  c.init_std = 0.5;
  c.amor.backbone = "gdn";
  c.amor.momentum = 0.5;  // the thresholds move visibly within a few steps
  c.oryx.chunk = 3;
  c.oryx.p_attention = 0.5;
  return c;
}

inline std::unique_ptr<model::LanguageModel> build(const model::ModelConfig& cfg, DType dtype, uint64_t seed) {
  auto m = model::build_model(cfg, dtype);
  m->params().initialize(seed);
  return m;
}

// Global micro-batch k of a run: G sequences of length T, a few ignored targets, sample ids
// numbering the sequences in data order.
inline model::Batch global_batch(const model::ModelConfig& cfg, int64_t G, int64_t T, uint64_t seed, int64_t k) {
  model::Batch b;
  b.tokens = amor::testing::randint({G, T}, seed * 1000 + 2 * k + 1, cfg.vocab);
  b.targets = amor::testing::randint({G, T}, seed * 1000 + 2 * k + 2, cfg.vocab);
  int32_t* tg = b.targets.data<int32_t>();
  for (int64_t i = 0; i < G * T; i += 5) tg[i] = -100;
  b.sample_ids = Tensor::empty({G}, DType::I64);
  for (int64_t i = 0; i < G; ++i) b.sample_ids.data<int64_t>()[i] = k * G + i;
  return b;
}

inline int64_t valid_count(const model::Batch& b) {
  int64_t n = 0;
  const int32_t* tg = b.targets.data<int32_t>();
  for (int64_t i = 0; i < b.targets.numel(); ++i) n += tg[i] != -100;
  return n;
}

// dloss of the global mean loss: 1/global_valid at this batch's valid targets.
inline Tensor loss_weights(const model::Batch& b, int64_t global_valid, DType dtype) {
  Tensor w = Tensor::zeros(b.targets.shape(), dtype);
  const int32_t* tg = b.targets.data<int32_t>();
  for (int64_t i = 0; i < w.numel(); ++i)
    if (tg[i] != -100) w.set_item(i, 1.0 / static_cast<double>(global_valid));
  return w;
}

struct StepResult {
  double loss = 0;       // mean over the global batch's valid tokens
  double grad_norm = 0;  // before clipping
  double switched = -1;  // sharded runs: share of tokens with an AMOR gate open / in Oryx attention
};

// Over one forward's output: (tokens switched on, tokens) of AMOR's gates or Oryx's modes.
inline std::pair<double, double> switched_tokens(const model::StepOutput& out) {
  double on = 0, n = 0;
  auto count = [&](const Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) on += t.item(i);
    n += static_cast<double>(t.numel());
  };
  for (const Tensor& g : out.gates) count(g);
  if (out.modes.defined()) count(out.modes);
  return {on, n};
}

// The one-rank run with full parameters and plain AdamW.
class ReferenceTrainer {
 public:
  ReferenceTrainer(const model::ModelConfig& cfg, DType dtype, uint64_t seed, FsdpOptions opt = {})
      : model_(build(cfg, dtype, seed)), opt_(opt) {
    for (auto& p : model_->params().params()) {
      m_.push_back(Tensor::zeros(p->value.shape(), dtype));
      v_.push_back(Tensor::zeros(p->value.shape(), dtype));
    }
  }
  StepResult step(const std::vector<model::Batch>& micro, double lr) {
    int64_t valid = 0;
    for (const auto& b : micro) valid += valid_count(b);
    model_->params().zero_grad();
    double loss_sum = 0;
    for (const auto& b : micro) {
      model::StepOutput out = model_->forward(b, /*training=*/true);
      loss_sum += out.loss_sum;
      model_->backward(loss_weights(b, valid, model_->params().dtype()));
    }
    std::vector<Tensor> grads;
    for (auto& p : model_->params().params()) grads.push_back(p->grad);
    StepResult r{loss_sum / static_cast<double>(valid), clip_grad_norm(grads, opt_.max_grad_norm)};
    ++t_;
    const auto& ps = model_->params().params();
    for (size_t i = 0; i < ps.size(); ++i)
      adamw_step(ps[i]->value, ps[i]->grad, m_[i], v_[i], t_, lr, opt_.beta1, opt_.beta2, opt_.eps,
                 ps[i]->weight_decay ? opt_.weight_decay : 0.0);
    return r;
  }
  model::LanguageModel& model() { return *model_; }

 private:
  std::unique_ptr<model::LanguageModel> model_;
  FsdpOptions opt_;
  std::vector<Tensor> m_, v_;
  int64_t t_ = 0;
};

// The same steps through Fsdp: this rank's slice of every global micro-batch.
class ShardedTrainer {
 public:
  ShardedTrainer(const model::ModelConfig& cfg, DType dtype, uint64_t seed, Communicator& comm,
                 FsdpOptions opt = {})
      : model_(build(cfg, dtype, seed)),
        comm_(comm),
        fsdp_(std::make_unique<Fsdp>(*model_, comm, opt)),
        compute_dtype_(opt.compute_dtype.value_or(dtype)) {}
  StepResult step(const std::vector<model::Batch>& global_micro, double lr) {
    int64_t valid = 0;
    for (const auto& b : global_micro) valid += valid_count(b);  // every rank sees the global batch
    fsdp_->zero_grad();
    double sums[3] = {0, 0, 0};  // loss, switched tokens, tokens
    for (const auto& g : global_micro) {
      model::Batch local = rank_slice(g, comm_.rank(), comm_.size());
      model::StepOutput out = fsdp_->forward(local, /*training=*/true);
      sums[0] += out.loss_sum;
      auto [on, n] = switched_tokens(out);
      sums[1] += on;
      sums[2] += n;
      fsdp_->backward(loss_weights(local, valid, compute_dtype_));
    }
    comm_.all_reduce(sums, 3, ReduceOp::Sum);
    StepResult r;
    r.loss = sums[0] / static_cast<double>(valid);
    if (sums[2] > 0) r.switched = sums[1] / sums[2];
    r.grad_norm = fsdp_->step(lr);
    return r;
  }
  Fsdp& fsdp() { return *fsdp_; }
  model::LanguageModel& model() { return *model_; }

 private:
  std::unique_ptr<model::LanguageModel> model_;
  Communicator& comm_;
  std::unique_ptr<Fsdp> fsdp_;
  DType compute_dtype_;  // the model's activations and per-token loss weights
};

// Mixed precision without sharding, spelled out: f64 masters and moments; before each step the
// masters are rounded into an f32 copy of the model, which runs forward and backward; its f32
// gradients are widened, clipped and applied by AdamW in f64. (What Fsdp does with
// compute_dtype = f32 over f64 masters, the cpu's stand-in for bf16 over f32 on the GPU.)
class MixedReferenceTrainer {
 public:
  MixedReferenceTrainer(const model::ModelConfig& cfg, uint64_t seed)
      : master_(build(cfg, DType::F64, seed)), compute_(build(cfg, DType::F32, seed)) {
    for (auto& p : master_->params().params()) {
      m_.push_back(Tensor::zeros(p->value.shape(), DType::F64));
      v_.push_back(Tensor::zeros(p->value.shape(), DType::F64));
    }
  }
  StepResult step(const std::vector<model::Batch>& micro, double lr) {
    const auto& mp = master_->params().params();
    const auto& cp = compute_->params().params();
    for (size_t i = 0; i < mp.size(); ++i) cp[i]->value.copy_from(mp[i]->value.to(DType::F32));
    int64_t valid = 0;
    for (const auto& b : micro) valid += valid_count(b);
    compute_->params().zero_grad();
    double loss_sum = 0;
    for (const auto& b : micro) {
      loss_sum += compute_->forward(b, /*training=*/true).loss_sum;
      compute_->backward(loss_weights(b, valid, DType::F32));
    }
    std::vector<Tensor> grads;
    for (auto& p : cp) grads.push_back(p->grad.to(DType::F64));
    StepResult r{loss_sum / static_cast<double>(valid), clip_grad_norm(grads, opt_.max_grad_norm)};
    ++t_;
    for (size_t i = 0; i < mp.size(); ++i)
      adamw_step(mp[i]->value, grads[i], m_[i], v_[i], t_, lr, opt_.beta1, opt_.beta2, opt_.eps,
                 mp[i]->weight_decay ? opt_.weight_decay : 0.0);
    return r;
  }
  model::LanguageModel& master() { return *master_; }

 private:
  std::unique_ptr<model::LanguageModel> master_, compute_;
  FsdpOptions opt_;
  std::vector<Tensor> m_, v_;
  int64_t t_ = 0;
};

// Largest |a-b| / (1 + |b|) over two parameter lists (same names, same order).
inline double max_param_diff(const std::vector<std::pair<std::string, Tensor>>& a, model::ParamStore& ref) {
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    const Tensor& r = ref.params()[k]->value;
    EXPECT_EQ(a[k].first, ref.params()[k]->name);
    EXPECT_EQ(a[k].second.shape(), r.shape()) << a[k].first;
    for (int64_t i = 0; i < r.numel(); ++i)
      worst = std::max(worst, std::abs(a[k].second.item(i) - r.item(i)) / (1 + std::abs(r.item(i))));
  }
  return worst;
}

// True when the two lists hold bitwise the same values.
inline bool bitwise_equal(const std::vector<std::pair<std::string, Tensor>>& a,
                          const std::vector<std::pair<std::string, Tensor>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].first != b[k].first || a[k].second.nbytes() != b[k].second.nbytes()) return false;
    if (std::memcmp(a[k].second.raw_data(), b[k].second.raw_data(), a[k].second.nbytes()) != 0) return false;
  }
  return true;
}

// The message of the amor::Error f throws ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#ifdef AMOR_HAVE_CUDA
// An NCCL communicator over MPI_COMM_WORLD, one GPU per rank chosen by the rank's place on its
// node; nullptr (the caller skips) when some node has fewer GPUs than ranks. Collective.
inline std::unique_ptr<NcclCommunicator> make_nccl_comm(double timeout_s = 0) {
  int gpus = 0;
  if (!cuda_available() || cudaGetDeviceCount(&gpus) != cudaSuccess) return nullptr;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL, &node);
  int local = 0, local_size = 1;
  MPI_Comm_rank(node, &local);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  int enough = local_size <= gpus ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &enough, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!enough) return nullptr;
  cudaSetDevice(local);
  return std::make_unique<NcclCommunicator>(MPI_COMM_WORLD, timeout_s);
}
#endif

}  // namespace amor::dist::testing
