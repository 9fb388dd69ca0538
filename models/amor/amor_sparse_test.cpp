// AMOR's sparse inference (design §3: K,V at every token; Q, attention and O only at firing
// tokens) against the dense masked form:
//  - the row helpers: gather/scatter (runs, empty and full sets, errors naming the bad index) and
//    row_stable_linear (a row's value does not depend on which other rows are computed with it);
//  - whole models at inference, sparse vs dense: losses, entropies, gates, predictions and each
//    block's attention output bitwise equal (f64 and f32, both residual modes, GDN/Mamba2
//    backbones, K = 1 and 3, GQA, sizes with BLAS remainder tiles), while the Q and O projections
//    computed n_fire rows and K, V all B*T (counted at the projections);
//  - a training forward (dense) with frozen thresholds computes bitwise what sparse inference does;
//  - gradients after a sparse forward equal the dense ones (to summation order);
//  - no firing row and every row firing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "kernels/elementwise/elementwise.h"
#include "kernels/linear/linear.h"
#include "models/amor/amor_test_support.h"
#include "models/amor/row_ops.h"
#include "models/infer/inference_session.h"
#include "kernels/core/backend.h"
#include "tests/common/gradcheck.h"
#include "tests/common/on_off_switch.h"

namespace amor::model {
namespace {

using namespace testing_amor;

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Equal as numbers (a zero row may be +0 in one form and -0 in the other).
bool values_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.item(i) != b.item(i)) return false;
  return true;
}

template <class F>
void expect_error_containing(F f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << text << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(AmorRows, GatherScatterRoundTrip) {
  Tensor x = testing::randn({9, 5}, 1);
  std::vector<int64_t> rows = {0, 1, 2, 5, 7, 8};  // three runs
  Tensor g = gather_rows(x, rows);
  ASSERT_EQ(g.shape(), (Shape{6, 5}));
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(g.item(i * 5 + c), x.item(rows[i] * 5 + c));
  Tensor s = scatter_rows(g, rows, 9);
  for (int64_t r = 0; r < 9; ++r) {
    bool in = std::find(rows.begin(), rows.end(), r) != rows.end();
    for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(s.item(r * 5 + c), in ? x.item(r * 5 + c) : 0.0);
  }
  std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_TRUE(bitwise_equal(scatter_rows(gather_rows(x, all), all, 9), x));

  Tensor gate = Tensor::from_vector<uint8_t>({3, 3}, {1, 1, 1, 0, 0, 1, 0, 1, 1});
  EXPECT_EQ(firing_rows(gate), rows);
  EXPECT_TRUE(firing_rows(Tensor::zeros({2, 4}, DType::U8)).empty());
}

TEST(AmorRows, BadRowsAreErrors) {
  Tensor x = testing::randn({4, 3}, 2);
  expect_error_containing([&] { gather_rows(x, {1, 4}); }, "row index 4 at position 1");
  expect_error_containing([&] { gather_rows(x, {2, 2}); }, "not increasing");
  expect_error_containing([&] { gather_rows(x, {}); }, "no rows");
  expect_error_containing([&] { scatter_rows(testing::randn({2, 3}, 3), {0, 1, 2}, 4); },
                          "argument 'src'");
  expect_error_containing([&] { scatter_rows(testing::randn({2, 3}, 3), {3, 1}, 4); },
                          "not increasing");
  expect_error_containing([&] { firing_rows(x); }, "gate");
}

// A row's projection is the same number whatever rows come with it (OpenBLAS's x W^T is not:
// remainder tiles use other kernels), and it is x W^T.
TEST(AmorRows, RowStableLinearDependsOnTheRowOnly) {
  for (DType dt : {DType::F64, DType::F32}) {
    Tensor x = testing::randn({37, 48}, 4, dt), w = testing::randn({40, 48}, 5, dt);
    Tensor y = row_stable_linear(x, w);
    EXPECT_LT(testing::rel_rms(y.to(DType::F64), linear_forward(x, w).to(DType::F64)),
              dt == DType::F64 ? 1e-14 : 1e-6);
    for (std::vector<int64_t> rows : {std::vector<int64_t>{36}, {0, 3, 5, 6, 7, 20, 35},
                                      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 30}}) {
      Tensor ys = row_stable_linear(gather_rows(x, rows), w);
      EXPECT_TRUE(bitwise_equal(ys, gather_rows(y, rows)));
    }
    Tensor y3 = row_stable_linear(x.view({1, 37, 48}), w);  // leading dims are rows
    EXPECT_EQ(y3.shape(), (Shape{1, 37, 40}));
    EXPECT_TRUE(bitwise_equal(y3.view({37, 40}), y));
  }
}

// A model config with sizes whose row counts hit BLAS remainder tiles.
ModelConfig sparse_config(const std::string& mode, int64_t blocks, const std::string& backbone) {
  ModelConfig c = tiny_amor(mode, blocks, "adaptive", backbone);
  c.d_model = 24;
  c.head_dim = 8;
  c.init_std = 0.3;
  c.mamba2.head_dim = 8;
  c.gdn.head_dim = 8;
  return c;
}

struct Pass {
  StepOutput out;
  std::vector<Tensor> y;                       // each block's attention output
  std::vector<AmorAttention::Rows> rows;       // each block's projection row counts
};

Pass run(AmorModel& m, const Batch& batch, bool training, const std::vector<AmorGateState>& state,
        const Tensor& w = Tensor()) {
  m.set_gate_state(state);
  m.params().zero_grad();
  Pass r;
  r.out = m.forward(batch, training);
  for (int64_t i = 0; i < m.num_blocks(); ++i) {
    r.y.push_back(m.block(i).last_attention().clone());
    r.rows.push_back(m.block(i).last_projection_rows());
  }
  if (w.defined()) m.backward(w);
  return r;
}

int64_t count_fired(const Tensor& gate) {
  int64_t n = 0;
  for (uint8_t g : gate.to_vector<uint8_t>()) n += g;
  return n;
}

void expect_same_outputs(const Pass& a, const Pass& b) {
  EXPECT_TRUE(bitwise_equal(a.out.token_loss, b.out.token_loss));
  EXPECT_TRUE(bitwise_equal(a.out.entropy, b.out.entropy));
  EXPECT_EQ(a.out.loss_sum, b.out.loss_sum);
  if (a.out.predictions.defined() || b.out.predictions.defined())
    EXPECT_TRUE(bitwise_equal(a.out.predictions, b.out.predictions));
  ASSERT_EQ(a.out.gates.size(), b.out.gates.size());
  for (size_t i = 0; i < a.out.gates.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(a.out.gates[i], b.out.gates[i])) << "block " << i;
    EXPECT_TRUE(bitwise_equal(a.out.gate_entropy[i], b.out.gate_entropy[i])) << "block " << i;
    EXPECT_EQ(a.out.tau[i], b.out.tau[i]) << "block " << i;
    EXPECT_TRUE(values_equal(a.y[i], b.y[i])) << "block " << i;
  }
}

// Sparse vs dense inference on one model, with calibrated (mixed) gates.
void check_sparse_equals_dense(const ModelConfig& cfg, DType dtype, int64_t B, int64_t T,
                               uint64_t seed) {
  SCOPED_TRACE(cfg.amor.residual_mode + " K=" + std::to_string(cfg.amor.blocks) + " " +
               cfg.amor.backbone + (dtype == DType::F64 ? " f64" : " f32") +
               " T=" + std::to_string(T));
  AmorModel probe(cfg, DType::F64), m(cfg, dtype);
  probe.params().initialize(seed);
  perturb_amor_weights(probe.params(), seed + 1);
  for (auto& p : m.params().params()) p->value.copy_from(probe.params().find(p->name)->value.to(dtype));
  Batch batch = tiny_batch(cfg, B, T, seed + 2);
  Calibrated cal = calibrate_gates(probe, batch, /*training=*/false);
  Tensor w = testing::randn({B, T}, seed + 3, dtype);

  m.set_sparse_inference(false);
  Pass dense = run(m, batch, false, cal.state, w);
  std::vector<Tensor> dense_grads;
  for (auto& p : m.params().params()) dense_grads.push_back(p->grad.clone());
  m.set_sparse_inference(true);
  Pass sparse = run(m, batch, false, cal.state, w);

  expect_same_outputs(sparse, dense);
  for (int64_t i = 0; i < m.num_blocks(); ++i) {
    const int64_t fired = count_fired(sparse.out.gates[i]);
    EXPECT_GT(fired, 0) << "block " << i;
    EXPECT_LT(fired, B * T) << "block " << i;
    const AmorAttention::Rows& s = sparse.rows[i];
    EXPECT_EQ(s.q, fired) << "block " << i;  // Q and O on the firing rows only
    EXPECT_EQ(s.o, fired) << "block " << i;
    EXPECT_EQ(s.k, B * T) << "block " << i;  // K and V at every token
    EXPECT_EQ(s.v, B * T) << "block " << i;
    const AmorAttention::Rows& d = dense.rows[i];
    EXPECT_EQ(d.q, B * T);
    EXPECT_EQ(d.o, B * T);
  }
  // The backward of the sparse form sums over the firing rows only: equal to rounding.
  const double tol = dtype == DType::F64 ? 1e-13 : 1e-5;
  const auto& ps = m.params().params();
  for (size_t k = 0; k < ps.size(); ++k)
    EXPECT_LT(testing::rel_rms(ps[k]->grad.to(DType::F64), dense_grads[k].to(DType::F64)), tol)
        << ps[k]->name;
}

TEST(AmorSparse, InferenceEqualsDenseMaskedBitwise) {
  uint64_t seed = 100;
  for (DType dt : {DType::F64, DType::F32}) {
    for (const char* mode : {"classic", "h"}) {
      check_sparse_equals_dense(sparse_config(mode, 3, "gdn"), dt, 2, 23, seed += 10);
      check_sparse_equals_dense(sparse_config(mode, 3, "mamba2"), dt, 3, 13, seed += 10);
    }
    ModelConfig gqa = sparse_config("classic", 1, "gdn");
    gqa.n_kv_heads = 1;
    check_sparse_equals_dense(gqa, dt, 2, 37, seed += 10);
  }
}

// With frozen thresholds (momentum 1) a training forward gates exactly as inference does; the
// dense masked training form then computes bitwise what sparse inference computes.
TEST(AmorSparse, TrainingDenseFormEqualsSparseInference) {
  for (DType dt : {DType::F64, DType::F32}) {
    ModelConfig cfg = sparse_config("h", 3, "gdn");
    cfg.amor.momentum = 1.0;
    AmorModel probe(cfg, DType::F64), m(cfg, dt);
    probe.params().initialize(7);
    perturb_amor_weights(probe.params(), 8);
    for (auto& p : m.params().params())
      p->value.copy_from(probe.params().find(p->name)->value.to(dt));
    Batch batch = tiny_batch(cfg, 2, 19, 9);
    Calibrated cal = calibrate_gates(probe, batch, /*training=*/false);
    Pass train = run(m, batch, true, cal.state);
    Pass infer = run(m, batch, false, cal.state);
    train.out.predictions = infer.out.predictions = Tensor();  // only inference predicts
    expect_same_outputs(infer, train);
    for (int64_t i = 0; i < m.num_blocks(); ++i) {
      EXPECT_EQ(train.rows[i].q, 2 * 19);
      EXPECT_EQ(infer.rows[i].q, count_fired(infer.out.gates[i]));
      EXPECT_LT(infer.rows[i].q, 2 * 19);
    }
  }
}

// No row firing (the blocks are the identity; Q and O never run) and every row firing.
TEST(AmorSparse, NoneAndAllFiring) {
  ModelConfig cfg = sparse_config("classic", 3, "mamba2");
  AmorModel m(cfg, DType::F64);
  m.params().initialize(3);
  perturb_amor_weights(m.params(), 4);
  Batch batch = tiny_batch(cfg, 2, 11, 5);
  Tensor w = testing::randn({2, 11}, 6);
  for (double threshold : {2.0, -1.0}) {  // entropies lie in [0, 1]
    std::vector<AmorGateState> state(3, AmorGateState{threshold, 0.0});
    m.set_sparse_inference(false);
    Pass dense = run(m, batch, false, state, w);
    std::vector<Tensor> dense_grads;
    for (auto& p : m.params().params()) dense_grads.push_back(p->grad.clone());
    m.set_sparse_inference(true);
    Pass sparse = run(m, batch, false, state, w);
    expect_same_outputs(sparse, dense);
    const int64_t want = threshold > 1 ? 0 : 22;
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(count_fired(sparse.out.gates[i]), want);
      EXPECT_EQ(sparse.rows[i].q, want);
      EXPECT_EQ(sparse.rows[i].o, want);
      EXPECT_EQ(sparse.rows[i].k, 22);
    }
    const auto& ps = m.params().params();
    for (size_t k = 0; k < ps.size(); ++k)
      EXPECT_LT(testing::rel_rms(ps[k]->grad, dense_grads[k]), 1e-13) << ps[k]->name;
    if (want == 0) {
      for (const char* n : {"amor.1.attn.q_proj.weight", "amor.1.attn.k_proj.weight",
                            "amor.1.attn.o_proj.weight"})
        EXPECT_EQ(testing::max_abs_diff(m.params().find(n)->grad,
                                        Tensor::zeros(m.params().find(n)->grad.shape(), DType::F64)),
                  0.0)
            << n;
    }
  }
}

// Decode with caches in the two inference forms (amor_attention.h): the dense one (every row's Q
// and O, the gate never read back) gives the sparse one's records at every step, with Q and O at
// every row where the sparse one computes them at the fired rows only. On the CPU equal as
// numbers (row_stable_linear); on the GPU (tol > 0) to tol, gates equal.
void check_decode_forms(DType dt, const char* backbone, Device device, double tol, uint64_t seed) {
  SCOPED_TRACE(std::string(backbone) + (dt == DType::F64 ? " f64" : " f32"));
  ModelConfig cfg = sparse_config("classic", 3, backbone);
  AmorModel probe(cfg, DType::F64), m(cfg, dt);
  probe.params().initialize(seed);
  perturb_amor_weights(probe.params(), seed + 1);
  for (auto& p : m.params().params()) {
    p->value = probe.params().find(p->name)->value.to(dt).to(device);
    ++p->version;
  }
  const int64_t B = 3, T = 12, P = 4;
  Batch batch = tiny_batch(cfg, B, T, seed + 2);
  m.set_gate_state(calibrate_gates(probe, batch, /*training=*/false).state);
  struct Run {
    std::vector<StepOutput> out;
    std::vector<AmorAttention::Rows> rows;  // per decode step and block
  };
  auto decode = [&](bool sparse) {
    m.set_sparse_inference(sparse);
    InferenceSession session(m, B);
    Run r;
    r.out.push_back(session.prefill(columns(batch.tokens, 0, P)));
    for (int64_t t = P; t < T; ++t) {
      r.out.push_back(session.step(columns(batch.tokens, t, 1).view({B})));
      for (int64_t i = 0; i < m.num_blocks(); ++i) r.rows.push_back(m.block(i).last_projection_rows());
    }
    return r;
  };
  const Run sparse = decode(true), dense = decode(false);
  auto same = [&](const Tensor& a, const Tensor& b) {
    const Tensor x = a.to(Device::CPU), y = b.to(Device::CPU);
    return tol > 0 ? testing::max_abs_diff(x.to(DType::F64), y.to(DType::F64)) <= tol : values_equal(x, y);
  };
  int64_t fired = 0, skipped = 0;
  for (size_t s = 0; s < sparse.out.size(); ++s) {
    const StepOutput &a = dense.out[s], &b = sparse.out[s];
    EXPECT_TRUE(same(a.entropy, b.entropy)) << "step " << s;
    EXPECT_TRUE(values_equal(a.predictions.to(Device::CPU), b.predictions.to(Device::CPU))) << "step " << s;
    for (int64_t i = 0; i < m.num_blocks(); ++i) {
      const Tensor gb = b.gates[i].to(Device::CPU);
      EXPECT_TRUE(bitwise_equal(a.gates[i].to(Device::CPU), gb)) << "step " << s << " block " << i;
      EXPECT_TRUE(same(a.gate_entropy[i], b.gate_entropy[i])) << "step " << s << " block " << i;
      if (s == 0) continue;  // the prefill
      const int64_t n = count_fired(gb);
      fired += n;
      skipped += B - n;
      const size_t k = (s - 1) * size_t(m.num_blocks()) + size_t(i);
      EXPECT_EQ(sparse.rows[k].q, n);
      EXPECT_EQ(sparse.rows[k].o, n);
      EXPECT_EQ(dense.rows[k].q, B);
      EXPECT_EQ(dense.rows[k].o, B);
    }
  }
  EXPECT_GT(fired, 0);  // both paths of the sparse form were compared
  EXPECT_GT(skipped, 0);
}

TEST(AmorSparse, DecodeDenseFormEqualsSparse) {
  uint64_t seed = 400;
  for (DType dt : {DType::F64, DType::F32})
    for (const char* backbone : {"gdn", "mamba2"}) check_decode_forms(dt, backbone, Device::CPU, 0, seed += 10);
}

TEST(AmorSparse, GpuDecodeDenseFormEqualsSparse) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  uint64_t seed = 500;
  for (const char* backbone : {"gdn", "mamba2"}) check_decode_forms(DType::F32, backbone, Device::CUDA, 1e-5, seed += 10);
}

// The dense step's stacked Q/K/V weight (amor_attention.h) is remade when a weight is written in
// place (same storage, Param::version incremented): after such a write a model that decoded before
// decodes exactly as a fresh model holding the new weights. On the GPU only (the cpu computes the
// three projections apart, with no stacked copy).
TEST(AmorSparse, GpuDenseStepFollowsWeightWrites) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  const ModelConfig cfg = sparse_config("classic", 3, "mamba2");
  AmorModel probe(cfg, DType::F64), used(cfg, DType::F32), fresh(cfg, DType::F32);
  probe.params().initialize(700);
  perturb_amor_weights(probe.params(), 701);
  for (AmorModel* m : {&used, &fresh})
    for (auto& p : m->params().params()) {
      p->value = probe.params().find(p->name)->value.to(DType::F32).to(Device::CUDA);
      ++p->version;
    }
  const int64_t B = 2, T = 8, P = 4;
  Batch batch = tiny_batch(cfg, B, T, 702);
  const std::vector<AmorGateState> gates = calibrate_gates(probe, batch, /*training=*/false).state;
  auto decode = [&](AmorModel& m) {
    m.set_gate_state(gates);
    m.set_sparse_inference(false);
    InferenceSession session(m, B);
    std::vector<StepOutput> out{session.prefill(columns(batch.tokens, 0, P))};
    for (int64_t t = P; t < T; ++t) out.push_back(session.step(columns(batch.tokens, t, 1).view({B})));
    return out;
  };
  decode(used);  // the stacked weights are made at its steps
  // New Q, K and V weights written in place (the storage stays) in both models.
  for (AmorModel* m : {&used, &fresh})
    for (auto& p : m->params().params()) {
      const std::string& n = p->name;
      if (n.find(".q_proj.") == std::string::npos && n.find(".k_proj.") == std::string::npos &&
          n.find(".v_proj.") == std::string::npos)
        continue;
      const void* before = p->value.raw_data();
      p->value.copy_from(scale(p->value.to(Device::CPU), 1.5));
      ++p->version;
      ASSERT_EQ(p->value.raw_data(), before) << n;
    }
  const std::vector<StepOutput> a = decode(used), b = decode(fresh);
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) {
    EXPECT_TRUE(bitwise_equal(a[s].entropy.to(Device::CPU), b[s].entropy.to(Device::CPU))) << "step " << s;
    for (size_t i = 0; i < a[s].gates.size(); ++i)
      EXPECT_TRUE(bitwise_equal(a[s].gates[i].to(Device::CPU), b[s].gates[i].to(Device::CPU)))
          << "step " << s << " block " << i;
  }
}

// AMOR_BLOCK_INFERENCE picks the form when the model is built; a value it does not list is
// refused, naming the variable, the value and what it accepts.
TEST(AmorSparse, BlockInferenceSwitch) {
  const ModelConfig cfg = sparse_config("classic", 1, "gdn");
  EXPECT_TRUE(AmorModel(cfg, DType::F64).sparse_inference());
  setenv("AMOR_BLOCK_INFERENCE", "dense", 1);
  EXPECT_FALSE(AmorModel(cfg, DType::F64).sparse_inference());
  setenv("AMOR_BLOCK_INFERENCE", "sparce", 1);
  expect_error_containing([&] { AmorModel m(cfg, DType::F64); },
                          "AMOR_BLOCK_INFERENCE is 'sparce'; it accepts sparse or dense");
  unsetenv("AMOR_BLOCK_INFERENCE");
  EXPECT_TRUE(AmorModel(cfg, DType::F64).sparse_inference());
}

// AMOR_FUSED_QKV_STEP: on unset, empty or 1, off at 0, anything else refused naming it.
TEST(AmorSparse, FusedQkvStepSwitch) {
  amor::testing::expect_on_off_switch("AMOR_FUSED_QKV_STEP", [] { return AmorAttention::read_fused_qkv_step_switch(); });
}

TEST(AmorSparse, AttentionChecksItsGate) {
  ModelConfig cfg = sparse_config("classic", 1, "gdn");
  ParamStore ps(DType::F64);
  AmorAttention attn(ps, "amor.0.attn", cfg);
  ps.initialize(1);
  Tensor hn = testing::randn({2, 5, cfg.d_model}, 2);
  expect_error_containing([&] { attn.forward(hn, Tensor::zeros({2, 4}, DType::U8), true); },
                          "argument 'gate'");
  expect_error_containing([&] { attn.forward(hn, Tensor::zeros({2, 5}, DType::F64), true); },
                          "argument 'gate'");
  expect_error_containing([&] { attn.backward(hn); }, "no saved forward");
}

}  // namespace
}  // namespace amor::model
