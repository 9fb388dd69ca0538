// Fsdp under mpirun at 1, 2 and 4 ranks against the one-rank run of the same global batch
// (dist_test_support.h: full parameters, plain AdamW): every model kind trains to the same losses,
// gradient norms, parameters and AMOR thresholds; gradient accumulation; per-rank memory 1/W;
// the prefetch; and the errors a misuse gets.
//
// Tolerance: in f64 the only differences are the order of reductions (a rank's backward sums its
// slice, the reduce-scatter sums the ranks; the norm sums shards), ~1e-16 per operation, which a
// few AdamW steps amplify to ~1e-13: we require 1e-10 relative. In f32 the same reordering is
// ~1e-7 per operation; AdamW's m/sqrt(v) amplifies it where gradients are tiny: 1e-4 relative.
// (Seen here: f64 up to 1e-13 in the gradient norm, 3e-14 in parameters; f32 up to 7e-6 in the
// norm, 2e-6 in parameters.)
#include <cmath>
#include <limits>

#include "kernels/core/caching_allocator.h"
#include "runner/dist/dist_test_support.h"
#include "runner/train/harness_eval.h"

namespace amor::dist {
namespace {

using namespace testing;

constexpr int64_t kGlobal = 4, kT = 7;

struct Agreement {
  double loss = 0, norm = 0, params = 0, tau = 0;
  double switched_min = 1, switched_max = 0;  // AMOR gates / Oryx modes over the steps
};

// Trains `steps` steps of `micro` micro-batches on the reference and through Fsdp on comm.
Agreement compare_runs(const model::ModelConfig& cfg, DType dtype, Communicator& comm, int steps, int micro,
                       uint64_t seed) {
  ReferenceTrainer ref(cfg, dtype, seed);
  ShardedTrainer sharded(cfg, dtype, seed, comm);
  Agreement a;
  for (int s = 0; s < steps; ++s) {
    std::vector<model::Batch> batches;
    for (int k = 0; k < micro; ++k) batches.push_back(global_batch(cfg, kGlobal, kT, seed, s * micro + k));
    StepResult r = ref.step(batches, 0.02);
    StepResult f = sharded.step(batches, 0.02);
    a.loss = std::max(a.loss, std::abs(f.loss - r.loss) / (1 + std::abs(r.loss)));
    a.norm = std::max(a.norm, std::abs(f.grad_norm - r.grad_norm) / (1 + std::abs(r.grad_norm)));
    if (f.switched >= 0) {
      a.switched_min = std::min(a.switched_min, f.switched);
      a.switched_max = std::max(a.switched_max, f.switched);
    }
  }
  a.params = max_param_diff(sharded.fsdp().full_parameters(), ref.model().params());
  if (cfg.kind == "amor") {
    auto sr = static_cast<model::AmorModel&>(ref.model()).gate_state();
    auto ss = static_cast<model::AmorModel&>(sharded.model()).gate_state();
    for (size_t i = 0; i < sr.size(); ++i)
      a.tau = std::max({a.tau, std::abs(sr[i].m - ss[i].m), std::abs(sr[i].s - ss[i].s)});
  }
  return a;
}

void expect_agree(const Agreement& a, double tol, const std::string& what) {
  EXPECT_LE(a.loss, tol) << what << ": losses";
  EXPECT_LE(a.norm, tol) << what << ": gradient norms";
  EXPECT_LE(a.params, tol) << what << ": parameters";
  EXPECT_LE(a.tau, tol) << what << ": AMOR thresholds";
}

// AMOR's gates and Oryx's modes must be mixed (some tokens on, some off), or the comparison
// would not exercise the cross-rank statistics and per-sequence modes.
void expect_mixed(const model::ModelConfig& cfg, const Agreement& a) {
  if (cfg.kind != "amor" && cfg.kind != "oryx") return;
  EXPECT_GT(a.switched_max, 0.0) << cfg.kind;
  EXPECT_LT(a.switched_min, 1.0) << cfg.kind;
}

std::vector<model::ModelConfig> every_kind() {
  std::vector<model::ModelConfig> v;
  for (const char* k : {"transformer", "mamba2", "gdn", "amor", "oryx"}) v.push_back(tiny(k));
  model::ModelConfig amor_h = tiny("amor");
  amor_h.amor.residual_mode = "h";
  amor_h.amor.backbone = "mamba2";
  v.push_back(amor_h);
  model::ModelConfig oryx_m = tiny("oryx");
  oryx_m.oryx.linear = "mamba2";
  v.push_back(oryx_m);
  model::ModelConfig serial = tiny("serial");
  serial.pattern = "GA";
  v.push_back(serial);
  return v;
}

TEST(Fsdp, EveryModelKindMatchesTheOneRankRunInF64) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (const auto& cfg : every_kind()) {
    const std::string what = cfg.kind + "/" + cfg.amor.residual_mode + "/" + cfg.oryx.linear;
    Agreement a = compare_runs(cfg, DType::F64, comm, 3, 1, 11);
    expect_agree(a, 1e-10, what);
    expect_mixed(cfg, a);
  }
}

TEST(Fsdp, GradientAccumulationOverMicroBatchesMatches) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (const char* kind : {"transformer", "amor", "oryx"})
    expect_agree(compare_runs(tiny(kind), DType::F64, comm, 2, 2, 23), 1e-10, kind);
}

TEST(Fsdp, Float32MatchesToReductionOrderTolerance) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (const char* kind : {"gdn", "amor"}) expect_agree(compare_runs(tiny(kind), DType::F32, comm, 3, 1, 5), 1e-4, kind);
}

// Mixed precision (f32 compute over f64 masters, the cpu's stand-in for bf16 over f32): W ranks
// equal the one-rank mixed-precision reference; the gathered weights are the masters rounded to
// the compute dtype, and masters, moments and gradient shards stay in the master dtype.
// Tolerance as for f32 (1e-4): the compute is f32, the reductions' order differs.
TEST(Fsdp, MixedPrecisionMatchesTheOneRankMixedRun) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  FsdpOptions opt;
  opt.compute_dtype = DType::F32;
  for (const char* kind : {"transformer", "gdn", "amor", "oryx"}) {
    model::ModelConfig cfg = tiny(kind);
    MixedReferenceTrainer ref(cfg, 17);
    ShardedTrainer sharded(cfg, DType::F64, 17, comm, opt);
    double loss = 0, norm = 0;
    for (int s = 0; s < 3; ++s) {
      std::vector<model::Batch> batches{global_batch(cfg, kGlobal, kT, 17, s)};
      StepResult r = ref.step(batches, 0.02), f = sharded.step(batches, 0.02);
      loss = std::max(loss, std::abs(f.loss - r.loss) / (1 + std::abs(r.loss)));
      norm = std::max(norm, std::abs(f.grad_norm - r.grad_norm) / (1 + std::abs(r.grad_norm)));
    }
    auto full = sharded.fsdp().full_parameters();
    for (const auto& [name, t] : full) EXPECT_EQ(t.dtype(), DType::F64) << kind << " " << name;
    EXPECT_LE(loss, 1e-4) << kind;
    EXPECT_LE(norm, 1e-4) << kind;
    EXPECT_LE(max_param_diff(full, ref.master().params()), 1e-4) << kind;
    // Bytes: f64 masters, moments and gradients (8 bytes per element, up to padding).
    const FsdpMemory m = sharded.fsdp().memory();
    EXPECT_EQ(m.model_param_bytes % 8, 0);
    EXPECT_GE(m.param_bytes * comm.size(), m.model_param_bytes);
  }
  // The f32 compute must differ from an all-f64 run, or the test would not see the rounding.
  model::ModelConfig cfg = tiny("transformer");
  ReferenceTrainer f64(cfg, DType::F64, 17);
  MixedReferenceTrainer mixed(cfg, 17);
  std::vector<model::Batch> batches{global_batch(cfg, kGlobal, kT, 17, 0)};
  EXPECT_NE(f64.step(batches, 0.02).loss, mixed.step(batches, 0.02).loss);
}

TEST(Fsdp, MixedPrecisionGathersTheRoundedMasters) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  FsdpOptions opt;
  opt.compute_dtype = DType::F32;
  model::ModelConfig cfg = tiny("gdn");
  auto reference = build(cfg, DType::F64, 5);
  auto model = build(cfg, DType::F64, 5);
  Fsdp fsdp(*model, comm, opt);
  struct Probe final : model::UnitHooks {
    Fsdp* f = nullptr;
    model::ParamStore* store = nullptr;
    model::ParamStore* ref = nullptr;
    int checked = 0;
    void gather(int u) override {
      f->gather(u);
      const auto& ps = store->params();
      for (size_t i = 0; i < ps.size(); ++i) {
        if (ps[i]->unit != u) continue;
        EXPECT_EQ(ps[i]->value.dtype(), DType::F32) << ps[i]->name;
        Tensor want = ref->params()[i]->value.to(DType::F32);
        for (int64_t j = 0; j < want.numel(); ++j) EXPECT_EQ(ps[i]->value.item(j), want.item(j));
        ++checked;
      }
    }
    void release(int u) override { f->release(u); }
    void grad_ready(int u) override { f->grad_ready(u); }
  } probe;
  probe.f = &fsdp;
  probe.store = &model->params();
  probe.ref = &reference->params();
  model->set_unit_hooks(&probe);
  model::Batch b = rank_slice(global_batch(cfg, kGlobal, kT, 5, 0), comm.rank(), comm.size());
  fsdp.forward(b, /*training=*/false);
  EXPECT_EQ(probe.checked, static_cast<int>(model->params().params().size()));
  model->set_unit_hooks(&fsdp);
}

// The evaluation replica (eval.dtype) holds its weights in the dtype asked for: the masters
// rounded to it, as the training gathers them (compute) or the masters themselves (master). Its
// forward then equals the training model's own forward on those gathered weights. (It once kept
// the f32 masters whatever was asked, so eval.dtype: compute evaluated in f32 on the GPU.)
TEST(Fsdp, EvalReplicaHoldsTheRequestedDtype) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  FsdpOptions opt;
  opt.compute_dtype = DType::F32;
  config::RunConfig rc;
  static_cast<model::ModelConfig&>(rc.model) = tiny("amor");
  auto reference = build(rc.model, DType::F64, 5);
  auto model = build(rc.model, DType::F64, 5);
  Fsdp fsdp(*model, comm, opt);
  for (DType want : {DType::F32, DType::F64}) {
    auto replica = eval_replica(rc, fsdp, *model, want, Device::CPU, {});
    const auto& ps = replica->params().params();
    ASSERT_EQ(ps.size(), reference->params().params().size());
    for (size_t i = 0; i < ps.size(); ++i) {
      ASSERT_EQ(ps[i]->value.dtype(), want) << ps[i]->name;
      Tensor r = reference->params().params()[i]->value.to(want);
      ASSERT_EQ(ps[i]->value.numel(), r.numel()) << ps[i]->name;
      for (int64_t j = 0; j < r.numel(); ++j) ASSERT_EQ(ps[i]->value.item(j), r.item(j)) << ps[i]->name;
    }
    // Its loss equals the f32-gathered training model's (want F32) or the f64 reference's.
    model::Batch b = rank_slice(global_batch(rc.model, kGlobal, kT, 5, 0), comm.rank(), comm.size());
    const double got = replica->forward(b, false).loss_sum;
    const double ref = want == DType::F32 ? fsdp.forward(b, false).loss_sum : reference->forward(b, false).loss_sum;
    EXPECT_EQ(got, ref) << dtype_name(want);
  }
}

TEST(Fsdp, TrainingActuallyMovesTheParameters) {
  // Guards the comparisons above against a vacuous pass (nothing trained, nothing to differ).
  MpiCommunicator comm(MPI_COMM_WORLD);
  model::ModelConfig cfg = tiny("transformer");
  auto before = build(cfg, DType::F64, 3);
  ShardedTrainer t(cfg, DType::F64, 3, comm);
  t.step({global_batch(cfg, kGlobal, kT, 3, 0)}, 0.02);
  EXPECT_GT(max_param_diff(t.fsdp().full_parameters(), before->params()), 1e-3);
}

TEST(Fsdp, MemoryPerRankIsOneOverTheWorldSize) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int W = comm.size();
  model::ModelConfig cfg = tiny("gdn");
  cfg.n_layers = 4;
  ShardedTrainer t(cfg, DType::F64, 9, comm);
  t.step({global_batch(cfg, kGlobal, kT, 9, 0)}, 0.02);
  // Expected from the store's shapes alone: ceil(unit numel / W) elements of 8 bytes per unit.
  auto full = build(cfg, DType::F64, 9);
  const auto& names = full->params().unit_names();
  std::vector<int64_t> unit_numel(names.size(), 0);
  for (const auto& p : full->params().params()) unit_numel[static_cast<size_t>(p->unit)] += p->value.numel();
  int64_t expect = 0, total = 0;
  for (int64_t n : unit_numel) {
    expect += (n + W - 1) / W * 8;
    total += n * 8;
  }
  FsdpMemory m = t.fsdp().memory();
  EXPECT_EQ(m.world_size, W);
  EXPECT_EQ(m.model_param_bytes, total);
  EXPECT_EQ(m.param_bytes, expect);
  EXPECT_EQ(m.grad_bytes, expect);
  EXPECT_EQ(m.optimizer_bytes, 2 * expect);
  // 1/W up to padding: at most W-1 elements per unit.
  EXPECT_GE(m.param_bytes * W, total);
  EXPECT_LE(m.param_bytes * W, total + static_cast<int64_t>(names.size()) * (W - 1) * 8);
  // Gathered units come and go: the peak is far below the whole model's weights and gradients.
  EXPECT_GT(m.peak_gathered_bytes, 0);
  EXPECT_LT(m.peak_gathered_bytes, 2 * total);
  EXPECT_NE(m.str().find("peak gathered"), std::string::npos);
  // Nothing stays gathered after a step: every Param is empty.
  for (const auto& p : t.model().params().params()) {
    EXPECT_FALSE(p->value.defined()) << p->name;
    EXPECT_FALSE(p->grad.defined()) << p->name;
  }
}

// Gradients and AdamW moments (3x the master shards) come into being with the first training
// pass: an evaluation-only run (train.steps 0) never holds them.
TEST(Fsdp, TheTrainingStateIsAllocatedOnlyWhenTrainingStarts) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  model::ModelConfig cfg = tiny("gdn");
  auto model = build(cfg, DType::F64, 9);
  Fsdp fsdp(*model, comm);
  const int64_t shards = fsdp.memory().param_bytes;
  CachingAllocator& alloc = allocator(Device::CPU);
  model::Batch local = rank_slice(global_batch(cfg, kGlobal, kT, 9, 0), comm.rank(), comm.size());
  fsdp.forward(local, /*training=*/false);
  const size_t evaluated = alloc.stats().bytes_in_use;
  fsdp.zero_grad();  // what a training step does first: only now the training state exists
  EXPECT_GE(alloc.stats().bytes_in_use, evaluated + 3 * static_cast<size_t>(shards));
  // The report is what a training step holds, before and after the allocation alike.
  EXPECT_EQ(fsdp.memory().grad_bytes, shards);
  EXPECT_EQ(fsdp.memory().optimizer_bytes, 2 * shards);
}

TEST(Fsdp, PrefetchServesTheNextUnitInBothPasses) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (const char* kind : {"transformer", "amor"}) {
    model::ModelConfig cfg = tiny(kind);
    ShardedTrainer t(cfg, DType::F64, 4, comm);
    t.step({global_batch(cfg, kGlobal, kT, 4, 0)}, 0.02);
    const FsdpStats& s = t.fsdp().stats();
    const int64_t units = static_cast<int64_t>(t.fsdp().units().size());
    // Forward gathers every unit once, backward all but the embedding (held from forward).
    EXPECT_EQ(s.gathers, 2 * units - 1) << kind;
    EXPECT_EQ(s.prefetch_hits, 2 * units - 2) << kind;  // all but the first unit of each pass
    EXPECT_EQ(s.prefetch_wasted, 0) << kind;
    EXPECT_EQ(s.reduce_scatters, units) << kind;
  }
}

TEST(Fsdp, WithoutPrefetchTheResultIsBitwiseTheSame) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  model::ModelConfig cfg = tiny("amor");
  FsdpOptions off;
  off.prefetch = false;
  ShardedTrainer a(cfg, DType::F64, 8, comm), b(cfg, DType::F64, 8, comm, off);
  for (int s = 0; s < 2; ++s) {
    auto batch = global_batch(cfg, kGlobal, kT, 8, s);
    EXPECT_EQ(a.step({batch}, 0.02).loss, b.step({batch}, 0.02).loss);
  }
  EXPECT_TRUE(bitwise_equal(a.fsdp().full_parameters(), b.fsdp().full_parameters()));
  EXPECT_EQ(b.fsdp().stats().prefetch_hits, 0);
}

TEST(Fsdp, RanksStartingFromDifferentParametersAreRefused) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  auto m = build(tiny("transformer"), DType::F64, 100 + static_cast<uint64_t>(comm.rank()));
  const std::string err = error_of([&] { Fsdp f(*m, comm); });
  EXPECT_NE(err.find("rank 1's initial parameters differ from rank 0's"), std::string::npos) << err;
}

TEST(Fsdp, ANonFiniteGradientNormSkipsTheUpdate) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  model::ModelConfig cfg = tiny("transformer");
  auto m = build(cfg, DType::F64, 6);
  Fsdp f(*m, comm);
  auto before = f.full_parameters();
  model::Batch local = rank_slice(global_batch(cfg, kGlobal, kT, 6, 0), comm.rank(), comm.size());
  f.zero_grad();
  f.forward(local, true);
  Tensor w = loss_weights(local, 100, DType::F64);
  w.set_item(1, std::numeric_limits<double>::quiet_NaN());
  f.backward(w);
  EXPECT_TRUE(std::isnan(f.step(0.02)));
  EXPECT_EQ(f.optimizer_step(), 0);
  EXPECT_TRUE(bitwise_equal(before, f.full_parameters()));
}

TEST(Fsdp, MisuseGivesClearErrors) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  model::ModelConfig cfg = tiny("transformer");
  auto m = build(cfg, DType::F64, 2);
  FsdpOptions bad;
  bad.max_grad_norm = 0;
  std::string err = error_of([&] { Fsdp f(*m, comm, bad); });
  EXPECT_NE(err.find("max_grad_norm must be positive"), std::string::npos) << err;

  Fsdp f(*m, comm);
  model::Batch local = rank_slice(global_batch(cfg, kGlobal, kT, 2, 0), comm.rank(), comm.size());
  err = error_of([&] { m->forward(local, true); });
  EXPECT_NE(err.find("outside Fsdp::forward/backward"), std::string::npos) << err;
  // A second Fsdp over a sharded model: its Params are empty.
  err = error_of([&] { Fsdp again(*m, comm); });
  EXPECT_NE(err.find("has no value: is the model already sharded?"), std::string::npos) << err;
  // The first one still works after the refused misuse.
  f.forward(local, true);
  f.backward(loss_weights(local, 100, DType::F64));
  EXPECT_TRUE(std::isfinite(f.step(0.02)));
}

TEST(RankSlice, SplitsTokensTargetsAndSampleIds) {
  model::ModelConfig cfg = tiny("oryx");
  model::Batch g = global_batch(cfg, 4, 3, 1, 2);
  model::Batch s = rank_slice(g, 1, 2);
  ASSERT_EQ(s.tokens.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(s.tokens.item(i), g.tokens.item(6 + i));
    EXPECT_EQ(s.targets.item(i), g.targets.item(6 + i));
  }
  EXPECT_EQ(s.sample_ids.item(0), g.sample_ids.item(2));
  EXPECT_EQ(s.sample_ids.item(1), g.sample_ids.item(3));
  std::string err = error_of([&] { rank_slice(g, 0, 3); });
  EXPECT_NE(err.find("4 sequences does not split over 3 ranks"), std::string::npos) << err;
  err = error_of([&] { rank_slice(g, 2, 2); });
  EXPECT_NE(err.find("rank 2 of world size 2 is not a rank"), std::string::npos) << err;
  model::Batch bad = g;
  bad.targets = Tensor::zeros({4, 2}, DType::I32);
  err = error_of([&] { rank_slice(bad, 0, 2); });
  EXPECT_NE(err.find("expected tokens and targets of one shape"), std::string::npos) << err;
  bad = g;
  bad.sample_ids = Tensor::zeros({3}, DType::I64);
  err = error_of([&] { rank_slice(bad, 0, 2); });
  EXPECT_NE(err.find("expected [4]"), std::string::npos) << err;
}

}  // namespace
}  // namespace amor::dist

int main(int argc, char** argv) { return amor::dist::testing::mpi_gtest_main(argc, argv); }
