// Decoding with caches equals recomputing the full forward, for every model kind (CPU): a prefill
// of the first p tokens (in one or two calls) and a step-by-step decode of the rest give, at every
// position, forward(training = false)'s entropy, greedy prediction, loss, AMOR gates and gate
// entropies, and Oryx modes. T = 11 is not a multiple of any scan chunk (4); B = 2; p = 0
// (pure decode, from empty states), 1, 5, 3 + 4 (two prefill calls) and T (pure prefill).
// In double the records agree to 1e-10 (relative, floor 1; they differ only by the summation
// order of the chunked scans vs the step recurrences); in f32 to 2e-4. Predictions, gates and
// modes are equal exactly. AMOR's sparse decode computes Q and O at exactly the fired tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "kernels/core/backend.h"
#include "models/infer/infer_test_support.h"

namespace amor::model {
namespace {

using namespace testing_infer;

constexpr int64_t kB = 2, kT = 11;

struct Split {
  std::string name;
  std::vector<int64_t> prefill;  // the prefill calls' lengths
};

std::vector<Split> splits() {
  return {{"p0", {}}, {"p1", {1}}, {"p5", {5}}, {"p3+4", {3, 4}}, {"pT", {kT}}};
}

int64_t prefill_len(const Split& s) {
  int64_t p = 0;
  for (int64_t c : s.prefill) p += c;
  return p;
}

// device CUDA: the model's parameters and the batch are moved there (the decode steps take
// their tokens from the host, as generation does); every record is compared on the host.
void check_kind(const KindCase& kc, DType dtype, double tol, uint64_t seed,
                Device device = Device::CPU) {
  std::unique_ptr<LanguageModel> model = make_model(kc.cfg, dtype, seed);
  if (device != Device::CPU) model->params().to(device);
  Batch batch{amor::testing::randint({kB, kT}, seed + 2, kc.cfg.vocab),
              amor::testing::randint({kB, kT}, seed + 3, kc.cfg.vocab)};
  batch.targets.data<int32_t>()[4] = -100;  // an ignored position
  Batch dev_batch{batch.tokens.to(device), batch.targets.to(device)};
  auto* amor = dynamic_cast<AmorModel*>(model.get());
  if (amor) {
    // The gates are compared exactly: no entropy may sit within the comparison's tolerance of
    // its threshold (on the GPU the decode's entropies differ from the forward's by f32 rounding).
    ASSERT_GT(calibrate_eval_gates(*amor, dev_batch), std::max(1e-5, tol))
        << kc.name << ": an entropy at its threshold";
  }
  for (const Split& split : splits()) {
    SCOPED_TRACE(kc.name + " " + split.name + " " + dtype_name(dtype));
    Batch ref_batch = dev_batch;
    if (kc.cfg.kind == "oryx")
      ref_batch.modes = oryx_inference_modes(kc.cfg.oryx, kB, kT, prefill_len(split));
    StepOutput ref = model->forward(ref_batch, /*training=*/false);
    Decoded dec = decode(*model, batch, split.prefill);
    EXPECT_LE(max_rel_diff(dec.out.entropy, ref.entropy), tol);
    EXPECT_LE(max_rel_diff(dec.out.token_loss, ref.token_loss), tol);
    EXPECT_EQ(dec.out.n_valid, ref.n_valid);
    EXPECT_NEAR(dec.out.loss_sum, ref.loss_sum, tol * std::max(1.0, std::abs(ref.loss_sum)));
    EXPECT_EQ(mismatches(dec.out.predictions, ref.predictions), 0);
    ASSERT_EQ(dec.out.gates.size(), ref.gates.size());
    for (size_t k = 0; k < ref.gates.size(); ++k) {
      EXPECT_EQ(mismatches(dec.out.gates[k], ref.gates[k]), 0) << "block " << k;
      EXPECT_LE(max_rel_diff(dec.out.gate_entropy[k], ref.gate_entropy[k]), tol) << "block " << k;
      EXPECT_EQ(dec.out.tau[k], ref.tau[k]) << "block " << k;
      // Sparse decode: Q and O at the fired tokens only.
      EXPECT_EQ(dec.step_q_rows[k], dec.step_fired[k]) << "block " << k;
      EXPECT_EQ(dec.step_o_rows[k], dec.step_fired[k]) << "block " << k;
    }
    EXPECT_EQ(ref.modes.defined(), dec.out.modes.defined());
    if (ref.modes.defined()) EXPECT_EQ(mismatches(dec.out.modes, ref.modes), 0);
  }
  if (amor) {
    // The gates were mixed (so both the firing and the skipping paths were compared), and the
    // decode never moved the frozen thresholds.
    StepOutput ref = model->forward(dev_batch, false);
    for (size_t k = 0; k < ref.gates.size(); ++k) {
      int64_t fired = 0;
      for (uint8_t g : ref.gates[k].to(Device::CPU).to_vector<uint8_t>()) fired += g;
      EXPECT_GT(fired, 0) << kc.name << " block " << k;
      EXPECT_LT(fired, kB * kT) << kc.name << " block " << k;
    }
  }
}

TEST(DecodeEquivalence, EveryKindDouble) {
  uint64_t seed = 100;
  for (const KindCase& kc : all_kinds()) check_kind(kc, DType::F64, 1e-10, seed += 10);
}

TEST(DecodeEquivalence, EveryKindFloat) {
  uint64_t seed = 500;
  for (const KindCase& kc : all_kinds()) check_kind(kc, DType::F32, 2e-4, seed += 10);
}

// AMOR's decode on the GPU (f32) against its own full forward there: the sparse decode path
// (gate read back, only the fired rows' Q, attention and O; nothing added when no row fires;
// alpha kept between steps) gives the forward's records at every position.
TEST(DecodeEquivalence, GpuAmorFloat) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  uint64_t seed = 900;
  for (const KindCase& kc : all_kinds())
    if (kc.cfg.kind == "amor") check_kind(kc, DType::F32, 1e-4, seed += 10, Device::CUDA);
}

// Oryx's modes of a decode follow the schedule at absolute positions: with
// prefill_linear_decode_attention the prefilled tokens are linear and the decoded ones attention.
TEST(DecodeEquivalence, OryxPrefillLinearDecodeAttentionModes) {
  KindCase kc{"oryx", tiny_oryx("gdn", "prefill_linear_decode_attention")};
  std::unique_ptr<LanguageModel> model = make_model(kc.cfg, DType::F64, 7);
  Batch batch{amor::testing::randint({kB, kT}, 8, kc.cfg.vocab),
              amor::testing::randint({kB, kT}, 9, kc.cfg.vocab)};
  Decoded dec = decode(*model, batch, {3, 4});
  std::vector<uint8_t> m = dec.out.modes.to_vector<uint8_t>();
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t t = 0; t < kT; ++t) EXPECT_EQ(m[b * kT + t], t < 7 ? 0 : 1) << t;
}

// The inference path calls the unit hooks around every use of a unit (as forward does), so it
// also runs sharded: with every released unit's parameters poisoned (NaN, as FSDP frees them),
// the decode gives the unhooked values.
class PoisoningHooks final : public UnitHooks {
 public:
  explicit PoisoningHooks(ParamStore& ps) : ps_(ps) {
    for (auto& p : ps.params()) saved_[p.get()] = p->value.clone();
    for (auto& p : ps.params()) poison(p.get());
  }
  void gather(int unit) override {
    for (auto& p : ps_.params())
      if (p->unit == unit) p->value.copy_from(saved_[p.get()]);
  }
  void release(int unit) override {
    for (auto& p : ps_.params())
      if (p->unit == unit) poison(p.get());
  }
  void grad_ready(int) override { ADD_FAILURE() << "grad_ready during inference"; }

 private:
  static void poison(Param* p) {
    for (int64_t i = 0; i < p->value.numel(); ++i)
      p->value.set_item(i, std::numeric_limits<double>::quiet_NaN());
  }
  ParamStore& ps_;
  std::map<Param*, Tensor> saved_;
};

TEST(DecodeEquivalence, UnitHooksAroundEveryUnit) {
  for (const KindCase& kc : all_kinds()) {
    SCOPED_TRACE(kc.name);
    std::unique_ptr<LanguageModel> model = make_model(kc.cfg, DType::F64, 31);
    Batch batch{amor::testing::randint({kB, 6}, 32, kc.cfg.vocab),
                amor::testing::randint({kB, 6}, 33, kc.cfg.vocab)};
    Decoded plain = decode(*model, batch, {3});
    PoisoningHooks hooks(model->params());
    model->set_unit_hooks(&hooks);
    Decoded hooked = decode(*model, batch, {3});
    model->set_unit_hooks(nullptr);
    EXPECT_EQ(max_rel_diff(hooked.out.entropy, plain.out.entropy), 0.0);
    EXPECT_EQ(max_rel_diff(hooked.out.token_loss, plain.out.token_loss), 0.0);
  }
}

TEST(DecodeEquivalence, ErrorsNameTheCall) {
  std::unique_ptr<LanguageModel> model = make_model(tiny("gdn"), DType::F64, 1);
  InferenceSession s(*model, 2);
  s.step(Tensor::from_vector<int32_t>({2}, {1, 2}));
  try {
    s.prefill(Tensor::from_vector<int32_t>({2, 1}, {1, 2}));
    ADD_FAILURE() << "prefill after step accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("InferenceSession::prefill"), std::string::npos) << e.what();
  }
  try {
    s.step(Tensor::from_vector<int32_t>({3}, {1, 2, 3}));
    ADD_FAILURE() << "3 tokens for 2 sequences accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[3]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace amor::model
