// The run contract (run_contract.h): what each model kind declares to the runner, the default
// entropy-gate metrics over micro-batches and ranks, AMOR's checkpoint state and run group, and
// Oryx's seed and modes, each checked against what the model does without the runner.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/core/error.h"
#include "models/core/config_keys.h"
#include "models/amor/amor_test_support.h"
#include "models/lm/language_model.h"
#include "models/lm/model_kinds.h"
#include "models/oryx/oryx_test_support.h"

namespace amor::model {
namespace {

using testing_amor::tiny_amor;
using testing_amor::tiny_batch;

// A run group of `ranks` ranks that all hold this rank's values: gather_flat repeats them, sum
// multiplies. Counts the calls, so a test sees which collectives a model asked for.
class MirrorGroup final : public RunGroup {
 public:
  explicit MirrorGroup(int ranks) : ranks_(ranks) {}
  int size() const override { return ranks_; }
  Tensor gather_flat(const Tensor& local) override {
    ++gathers;
    const Tensor flat = local.view({local.numel()});
    Tensor out = Tensor::empty({flat.numel() * ranks_}, local.dtype(), local.device());
    for (int r = 0; r < ranks_; ++r) out.slice_flat(r * flat.numel(), {flat.numel()}).copy_from(flat);
    return out;
  }
  void sum(std::vector<double>& values) override {
    ++sums;
    for (double& v : values) v *= ranks_;
  }
  int gathers = 0, sums = 0;

 private:
  int ranks_;
};

std::unique_ptr<LanguageModel> built(const ModelConfig& cfg) {
  auto m = build_model(cfg, DType::F64);
  m->params().initialize(3);
  return m;
}

TEST(RunContract, EveryKindDeclaresTheGateColumnsWithItsGateRows) {
  ModelConfig stack = tiny_amor("classic", 1);
  stack.kind = "transformer";
  for (const ModelConfig& cfg : {stack, tiny_amor("classic", 3), testing_oryx::tiny_oryx("gdn")}) {
    auto m = built(cfg);
    const int64_t K = cfg.kind == "amor" ? 3 : 0;
    EXPECT_EQ(m->token_gate_rows(), K) << cfg.kind;
    EXPECT_EQ(m->takes_modes(), cfg.kind == "oryx") << cfg.kind;
    const std::vector<MetricColumn> cols = m->metric_columns();
    ASSERT_EQ(cols.size(), 4u) << cfg.kind;
    EXPECT_EQ(cols[0].name, "fire_rate");
    EXPECT_TRUE(cols[0].shape.empty());
    EXPECT_EQ(cols[1].name, "tau");
    EXPECT_EQ(cols[2].name, "block_fire_rate");
    EXPECT_EQ(cols[2].shape, std::vector<int64_t>{K});
    EXPECT_EQ(cols[3].name, "block_tau");
    EXPECT_EQ(cols[3].shape, std::vector<int64_t>{K});
    ASSERT_EQ(m->summary_metrics().size(), 1u);
    EXPECT_EQ(m->summary_metrics()[0].name, "fire_rate");
    EXPECT_EQ(m->summary_metrics()[0].label, "fire");
    // The per-token columns of /tokens/<set>: mode [total] and gate [K, total] (amor_blocks = K).
    const std::vector<TokenColumn> tc = m->token_columns();
    ASSERT_EQ(tc.size(), 2u) << cfg.kind;
    EXPECT_EQ(tc[0].name, "mode");
    EXPECT_TRUE(tc[0].rows_attr.empty());
    EXPECT_EQ(tc[1].name, "gate");
    EXPECT_EQ(tc[1].rows_attr, "amor_blocks");
    EXPECT_EQ(tc[1].rows, K);
    EXPECT_EQ(token_row_count(tc), 1 + K);
    if (cfg.kind != "amor") EXPECT_TRUE(m->checkpoint_state().empty()) << cfg.kind;
  }
}

// Fire rates: fired decisions over decided tokens, per gate row and over all rows, summed over
// micro-batches and the group's ranks; tau: the last micro-batch's thresholds.
TEST(RunContract, GateMetricsCountFiresOverMicroBatchesAndRanks) {
  auto m = built(tiny_amor("classic", 3));
  auto acc = m->new_step_metrics();
  auto gate = [](std::vector<uint8_t> v) { return Tensor::from_vector<uint8_t>({2, 2}, v); };
  StepOutput a, b;
  a.gates = {gate({1, 0, 0, 0}), gate({1, 1, 0, 0}), gate({0, 0, 0, 0})};
  a.tau = {0.1, 0.2, 0.3};
  b.gates = {gate({1, 1, 1, 0}), gate({0, 0, 0, 0}), gate({1, 1, 1, 1})};
  b.tau = {0.4, 0.5, 0.6};
  acc->add(a);
  acc->add(b);
  MirrorGroup two(2);
  const MetricRow row = acc->finish(two);
  EXPECT_EQ(two.sums, 1);
  EXPECT_EQ(row.at("block_fire_rate"), (std::vector<double>{4.0 / 8, 2.0 / 8, 4.0 / 8}));
  EXPECT_EQ(row.at("fire_rate"), std::vector<double>{10.0 / 24});
  EXPECT_EQ(row.at("block_tau"), (std::vector<double>{0.4, 0.5, 0.6}));
  EXPECT_EQ(row.at("tau"), std::vector<double>{0.6});

  // A model without gates: NaN, empty per-row values, and no collective.
  ModelConfig t = tiny_amor("classic", 1);
  t.kind = "transformer";
  auto plain = built(t);
  auto none = plain->new_step_metrics();
  none->add(plain->forward(tiny_batch(t, 2, 5, 1), true));
  MirrorGroup g(2);
  const MetricRow empty = none->finish(g);
  EXPECT_EQ(g.sums, 0);
  EXPECT_TRUE(std::isnan(empty.at("fire_rate")[0]));
  EXPECT_TRUE(std::isnan(empty.at("tau")[0]));
  EXPECT_TRUE(empty.at("block_fire_rate").empty());
  EXPECT_TRUE(empty.at("block_tau").empty());
}

// The checkpoint state round-trips exactly (the doubles of every block's EMA), under the name
// and format older checkpoints have; a resume without it is refused, a weights-only load keeps
// the initial thresholds.
TEST(RunContract, AmorCheckpointStateRoundTripsUnderItsOldName) {
  const ModelConfig cfg = tiny_amor("h", 3);
  auto m = built(cfg);
  std::vector<AmorGateState> s = {{0.1 + 1e-17, 1.0 / 3}, {0.7071067811865476, 2e-300}, {0.25, 0.125}};
  static_cast<AmorModel&>(*m).set_gate_state(s);
  const auto saved = m->checkpoint_state();
  ASSERT_EQ(saved.size(), 1u);
  ASSERT_TRUE(saved.count("amor_gates"));
  auto other = built(cfg);
  other->restore_checkpoint_state(saved, /*required=*/true);
  const auto got = static_cast<AmorModel&>(*other).gate_state();
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(got[i].m, s[i].m);
    EXPECT_EQ(got[i].s, s[i].s);
  }
  // What a checkpoint written before the run contract holds (step 20 of a 3-block AMOR run, its
  // fsdp.json "extra"): restored to the same doubles, and written back byte for byte.
  const std::string old_format =
      R"([{"m":0.98613297961287838,"s":0.0018748459809982505},{"m":0.98599326387924169,"s":0.0018920885164015523},)"
      R"({"m":0.98599326455820357,"s":0.0018918714366777188}])";
  other->restore_checkpoint_state({{"amor_gates", old_format}, {"tokens_seen", "1"}}, /*required=*/true);
  EXPECT_EQ(static_cast<AmorModel&>(*other).gate_state()[2].m, 0.98599326455820357);
  EXPECT_EQ(static_cast<AmorModel&>(*other).gate_state()[0].s, 0.0018748459809982505);
  EXPECT_EQ(other->checkpoint_state().at("amor_gates"), old_format);
  auto fresh = built(cfg);
  fresh->restore_checkpoint_state({}, /*required=*/false);
  EXPECT_EQ(static_cast<AmorModel&>(*fresh).gate_state()[0].m, cfg.amor.m_init);
  try {
    fresh->restore_checkpoint_state({{"data_position", "0:0"}}, /*required=*/true);
    ADD_FAILURE() << "a resume without amor_gates was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no 'amor_gates'"), std::string::npos) << e.what();
  }
}

// The run group feeds AMOR's gate statistics: one gather per block per training forward (none
// outside training), and W ranks holding the same sequences move the EMA as one rank holding
// them W times (the median and std of repeated values), which a model without the group would
// not see. nullptr detaches it again.
TEST(RunContract, AmorGatesGatherOverTheRunGroup) {
  const ModelConfig cfg = tiny_amor("classic", 3);
  const Batch batch = tiny_batch(cfg, 2, 7, 11);
  Batch doubled;  // the same two sequences twice: what one rank holds for two mirrored ranks
  {
    std::vector<int32_t> tok = batch.tokens.to_vector<int32_t>(), tgt = batch.targets.to_vector<int32_t>();
    std::vector<int32_t> tok2 = tok, tgt2 = tgt;
    tok2.insert(tok2.end(), tok.begin(), tok.end());
    tgt2.insert(tgt2.end(), tgt.begin(), tgt.end());
    doubled = Batch{Tensor::from_vector<int32_t>({4, 7}, tok2), Tensor::from_vector<int32_t>({4, 7}, tgt2)};
  }
  auto grouped = built(cfg), alone = built(cfg), one_rank = built(cfg);
  MirrorGroup two(2);
  grouped->set_run_group(&two);
  const StepOutput g = grouped->forward(batch, true);
  EXPECT_EQ(two.gathers, 3);
  grouped->forward(batch, false);
  EXPECT_EQ(two.gathers, 3);
  const StepOutput o = one_rank->forward(doubled, true);
  alone->forward(batch, true);
  const auto sg = static_cast<AmorModel&>(*grouped).gate_state(), so = static_cast<AmorModel&>(*one_rank).gate_state();
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(sg[k].m, so[k].m) << k;
    EXPECT_EQ(sg[k].s, so[k].s) << k;
    EXPECT_EQ(g.tau[k], o.tau[k]) << k;
  }
  // The std of a batch repeated differs from the batch's own (unbiased: n-1 vs 2n-1).
  EXPECT_NE(static_cast<AmorModel&>(*alone).gate_state()[0].s, sg[0].s);
  grouped->set_run_group(nullptr);
  grouped->forward(batch, true);
  EXPECT_EQ(two.gathers, 3);
}

// set_run_seed is the mode seed the runner used to set by hand (train.seed ^ "oryx"): the
// training modes it draws are those of set_mode_seed with that value.
TEST(RunContract, OryxRunSeedDrawsTheModesOfItsModeSeed) {
  const ModelConfig cfg = testing_oryx::tiny_oryx("gdn");
  Batch b{Tensor::from_vector<int32_t>({2, 9}, std::vector<int32_t>(18, 3)),
          Tensor::from_vector<int32_t>({2, 9}, std::vector<int32_t>(18, 4))};
  b.sample_ids = Tensor::from_vector<int64_t>({2}, {5, 6});
  auto by_run = built(cfg), by_mode = built(cfg), other = built(cfg);
  by_run->set_run_seed(1234);
  static_cast<StackModel&>(*by_mode).set_mode_seed(1234ull ^ 0x6f727978ull);
  static_cast<StackModel&>(*other).set_mode_seed(1234);
  const Tensor m1 = by_run->forward(b, true).modes, m2 = by_mode->forward(b, true).modes;
  EXPECT_EQ(m1.to_vector<uint8_t>(), m2.to_vector<uint8_t>());
  bool differs = false;
  for (uint64_t seed = 0; seed < 8 && !differs; ++seed) {
    static_cast<StackModel&>(*other).set_mode_seed(seed);
    differs = other->forward(b, true).modes.to_vector<uint8_t>() != m1.to_vector<uint8_t>();
  }
  EXPECT_TRUE(differs) << "the modes do not depend on the seed, so this test would prove nothing";
}

// The kind traits that runner/ asks instead of naming kinds (model_kinds.h): every kind the
// schema accepts, in its order; what each needs; and the built model agrees with its kind's.
struct KindKeyProbe {
  std::vector<std::string> kinds;
  template <class B, class T>
  void key(std::string_view name, T B::*, const keys::Allowed& allowed, std::string_view) {
    if (name == "kind") kinds = keys::choice_list(allowed.one_of);
  }
  template <class B, class Sub>
  void section(std::string_view, Sub B::*) {}
};

TEST(RunContract, KindTraitsCoverTheSchemasKindsAndAgreeWithTheModels) {
  KindKeyProbe probe;
  declare_keys(std::type_identity<ModelConfig>{}, probe);
  EXPECT_EQ(model_kinds(), probe.kinds);
  EXPECT_EQ(kinds_with(&KindTraits::takes_modes), "oryx");
  EXPECT_EQ(kinds_with(&KindTraits::needs_pattern), "serial");
  ModelConfig stack = tiny_amor("classic", 1);
  stack.kind = "transformer";
  for (const ModelConfig& cfg : {stack, tiny_amor("classic", 3), testing_oryx::tiny_oryx("gdn")}) {
    auto m = built(cfg);
    EXPECT_EQ(m->takes_modes(), kind_traits(cfg.kind).takes_modes) << cfg.kind;
    const auto sm = m->summary_metrics();
    ASSERT_EQ(sm.size(), kind_traits(cfg.kind).summary_metrics.size()) << cfg.kind;
    for (size_t i = 0; i < sm.size(); ++i) EXPECT_EQ(sm[i].name, kind_traits(cfg.kind).summary_metrics[i].name);
  }
}

}  // namespace
}  // namespace amor::model
