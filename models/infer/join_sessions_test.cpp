// InferenceSession::join: sessions prefilled apart (prompts of different lengths), joined, then
// prefilled further and stepped together, give every sequence the records of its own session
// (every model kind, f64); a KV cache's rows keep their own lengths and positions; joins that
// cannot be right are refused.
#include <gtest/gtest.h>

#include "kernels/core/backend.h"
#include "models/infer/infer_test_support.h"
#include "models/infer/kv_cache.h"

namespace amor::model {
namespace {

using namespace testing_infer;

// Rows [b0, b0 + n) of a [B,T] cpu tensor.
Tensor rows(const Tensor& x, int64_t b0, int64_t n) {
  const int64_t T = x.size(1);
  return x.slice_flat(b0 * T, {n, T});
}

// Sequence b of a joined step against row `row` of its own session's step: every record, to
// `tol` relative (entropies, losses, gate entropies) and exactly (predictions, gates, modes).
void expect_row_equal(const StepOutput& joined, int64_t b, const StepOutput& own, int64_t row, double tol) {
  const int64_t T = own.entropy.size(1);
  auto r = [&](const Tensor& x, int64_t i) { return rows(x.to(Device::CPU), i, 1); };
  ASSERT_EQ(joined.entropy.size(1), T);
  EXPECT_LT(max_rel_diff(r(joined.entropy, b), r(own.entropy, row)), tol);
  EXPECT_LT(max_rel_diff(r(joined.token_loss, b), r(own.token_loss, row)), tol);
  EXPECT_EQ(mismatches(r(joined.predictions, b), r(own.predictions, row)), 0);
  ASSERT_EQ(joined.gates.size(), own.gates.size());
  for (size_t k = 0; k < own.gates.size(); ++k) {
    EXPECT_EQ(mismatches(r(joined.gates[k], b), r(own.gates[k], row)), 0) << "block " << k;
    EXPECT_LT(max_rel_diff(r(joined.gate_entropy[k], b), r(own.gate_entropy[k], row)), tol);
  }
  ASSERT_EQ(joined.modes.defined(), own.modes.defined());
  if (own.modes.defined()) EXPECT_EQ(mismatches(r(joined.modes, b), r(own.modes, row)), 0);
}

// Three prompts of lengths 5 (two sequences), 3 and 7, each prefilled in its own session; the
// join is prefilled with 2 more tokens and stepped 4 times, with targets (so the loss is
// compared too; steps without targets when `graphs`, which then replay after the first), and
// each sequence's records are compared with those of its own session doing the same.
void check_join(const ModelConfig& cfg, DType dtype, Device device, double tol, bool graphs = false) {
  const std::vector<int64_t> batch = {2, 1, 1}, prompt = {5, 3, 7};
  const int64_t extra = 2, steps = 4, B = 4, longest = 7 + extra + steps;
  std::unique_ptr<LanguageModel> model = make_model(cfg, dtype, 91);
  const Tensor tokens = amor::testing::randint({B, longest + 1}, 7, cfg.vocab);
  if (auto* amor = dynamic_cast<AmorModel*>(model.get())) {
    Batch probe;
    probe.tokens = columns(tokens, 0, longest);
    probe.targets = columns(tokens, 1, longest);
    calibrate_eval_gates(*amor, probe);
  }
  if (device == Device::CUDA)
    model->params().to(Device::CUDA);
  // Sequences [b0, b0 + n_seq) from position t0, n tokens, and the next ones as targets.
  auto part = [&](int64_t b0, int64_t n_seq, int64_t t0, int64_t n) {
    return std::pair{columns(rows(tokens, b0, n_seq), t0, n), columns(rows(tokens, b0, n_seq), t0 + 1, n)};
  };
  std::vector<std::unique_ptr<InferenceSession>> own, parts;
  for (size_t p = 0, b0 = 0; p < batch.size(); b0 += batch[p], ++p) {
    for (auto* list : {&own, &parts}) {
      list->push_back(std::make_unique<InferenceSession>(*model, batch[p]));
      list->back()->use_graphs(false);
      auto [x, y] = part(static_cast<int64_t>(b0), batch[p], 0, prompt[p]);
      list->back()->prefill(x, y);
    }
  }
  parts.front()->use_graphs(graphs);  // the join takes the first part's switch
  std::unique_ptr<InferenceSession> joined = InferenceSession::join(std::move(parts));
  ASSERT_EQ(joined->batch(), B);
  EXPECT_EQ(joined->graphs_on(), graphs);
  EXPECT_EQ(joined->length(3), 7);
  EXPECT_THROW(joined->length(), Error);  // not one position

  // Columns [P + t, P + t + n) of each sequence (P its prompt's length).
  int64_t graphed = 0;
  auto run = [&](int64_t t, int64_t n) {
    Tensor x = Tensor::empty({B, n}, DType::I32), y = Tensor::empty({B, n}, DType::I32);
    for (size_t p = 0, b0 = 0; p < batch.size(); b0 += batch[p], ++p) {
      auto [xp, yp] = part(static_cast<int64_t>(b0), batch[p], prompt[p] + t, n);
      x.slice_flat(static_cast<int64_t>(b0) * n, {batch[p] * n}).copy_from(xp.view({batch[p] * n}));
      y.slice_flat(static_cast<int64_t>(b0) * n, {batch[p] * n}).copy_from(yp.view({batch[p] * n}));
    }
    const bool step = t >= extra;
    const Tensor no_targets;
    StepOutput j = !step ? joined->prefill(x, y) : joined->step(x.view({B}), graphs ? no_targets : y.view({B}));
    graphed += step && joined->last_step_graphed();
    for (size_t p = 0, b0 = 0; p < batch.size(); b0 += batch[p], ++p) {
      auto [xp, yp] = part(static_cast<int64_t>(b0), batch[p], prompt[p] + t, n);
      StepOutput o = !step ? own[p]->prefill(xp, yp)
                           : own[p]->step(xp.view({batch[p]}), graphs ? no_targets : yp.view({batch[p]}));
      for (int64_t r = 0; r < batch[p]; ++r) {
        SCOPED_TRACE("sequence " + std::to_string(b0 + r) + " at prompt + " + std::to_string(t));
        expect_row_equal(j, static_cast<int64_t>(b0) + r, o, r, tol);
      }
    }
  };
  run(0, extra);
  for (int64_t s = 0; s < steps; ++s) run(extra + s, 1);
  if (graphs) EXPECT_EQ(graphed, steps - 1);  // the first step runs eagerly, the others replay
  for (size_t p = 0, b0 = 0; p < batch.size(); b0 += batch[p], ++p)
    EXPECT_EQ(joined->length(static_cast<int64_t>(b0)), prompt[p] + extra + steps);
}

TEST(JoinSessions, EverySequenceDecodesAsInItsOwnSession) {
  for (const KindCase& kc : all_kinds()) {
    SCOPED_TRACE(kc.name);
    check_join(kc.cfg, DType::F64, Device::CPU, 1e-12);
  }
}

// On the GPU in f32 (a batched GEMM may round differently from one of fewer rows: 1e-4), and
// with decode graphs for the kinds that capture (the joined states are new tensors; AMOR's
// capturable dense form is in decode_graph_test).
TEST(JoinSessions, GpuEverySequenceDecodesAsInItsOwnSession) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  for (const KindCase& kc : all_kinds()) {
    if (kc.cfg.kind == "amor") continue;  // gates calibrated on the cpu may sit within f32 rounding
    SCOPED_TRACE(kc.name);
    check_join(kc.cfg, DType::F32, Device::CUDA, 1e-4);
  }
  // With attention (issue #18): the joined KV caches hold sequences of different lengths, which
  // the captured steps read on the device (kv_cache.h's step path).
  StepPathOnGpu on(true);
  ModelConfig serial = tiny("serial");
  serial.pattern = "MA";
  ModelConfig fused = tiny("fused");
  fused.fused_linear = "gdn";
  const std::vector<std::pair<std::string, ModelConfig>> graphed = {
      {"mamba2", tiny("mamba2")}, {"gdn", tiny("gdn")}, {"transformer", tiny("transformer")},
      {"serial_MA", serial}, {"fused_gdn", fused}};
  for (const auto& [name, cfg] : graphed) {
    SCOPED_TRACE(name + " with decode graphs");
    check_join(cfg, DType::F32, Device::CUDA, 1e-4, /*graphs=*/true);
  }
}

TEST(JoinSessions, RefusesWhatCannotJoin) {
  std::unique_ptr<LanguageModel> a = make_model(tiny("transformer"), DType::F64, 1);
  std::unique_ptr<LanguageModel> b = make_model(tiny("transformer"), DType::F64, 2);
  const Tensor x = amor::testing::randint({1, 4}, 3, 23);
  auto prefilled = [&](LanguageModel& m) {
    auto s = std::make_unique<InferenceSession>(m, 1);
    s->prefill(x);
    return s;
  };
  auto expect_refused = [](std::vector<std::unique_ptr<InferenceSession>> parts, const std::string& what) {
    try {
      InferenceSession::join(std::move(parts));
      ADD_FAILURE() << "joined: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  {
    std::vector<std::unique_ptr<InferenceSession>> p;
    p.push_back(prefilled(*a));
    p.push_back(prefilled(*b));
    expect_refused(std::move(p), "another model");
  }
  {
    std::vector<std::unique_ptr<InferenceSession>> p;
    p.push_back(prefilled(*a));
    p.push_back(prefilled(*a));
    p.back()->step(Tensor::from_vector<int32_t>({1}, {2}));
    expect_refused(std::move(p), "decoded already");
  }
  {
    std::vector<std::unique_ptr<InferenceSession>> p;
    p.push_back(prefilled(*a));
    p.push_back(std::make_unique<InferenceSession>(*a, 2));
    expect_refused(std::move(p), "not been prefilled");
  }
  expect_refused({}, "no sessions");
}

TEST(KvCacheRows, JoinedRowsKeepTheirLengthsAndPositions) {
  const int64_t H = 2, D = 4;
  auto keys = [&](int64_t B, int64_t T, uint64_t seed) { return amor::testing::randn({B, T, H, D}, seed); };
  KvCache a, b;
  Tensor ka = keys(2, 3, 1), va = keys(2, 3, 2), kb = keys(1, 5, 3), vb = keys(1, 5, 4);
  a.append(ka, va);
  b.append(kb, vb);
  EXPECT_TRUE(a.uniform());
  EXPECT_EQ(a.next_positions(2).offset, 3);
  EXPECT_FALSE(a.next_positions(2).per_sequence.defined());
  a.append_rows(b);
  ASSERT_EQ(a.sequences(), 3);
  EXPECT_EQ(b.sequences(), 0);
  EXPECT_FALSE(a.uniform());
  EXPECT_EQ(a.length(0), 3);
  EXPECT_EQ(a.length(2), 5);
  const NextPositions at = a.next_positions(2);
  ASSERT_TRUE(at.per_sequence.defined());
  EXPECT_EQ(at.per_sequence.to_vector<int64_t>(), (std::vector<int64_t>{3, 4, 3, 4, 5, 6}));
  // The rows are the appended keys, each sequence's own.
  EXPECT_EQ(mismatches(a.keys(1).view({3 * H * D}), ka.slice_flat(3 * H * D, {3 * H * D})), 0);
  EXPECT_EQ(mismatches(a.values(2).view({5 * H * D}), vb.view({5 * H * D})), 0);
  // One more token each lands after each sequence's own tokens, growing the storage.
  for (int i = 0; i < 20; ++i) a.append(keys(3, 1, 10 + i), keys(3, 1, 40 + i));
  EXPECT_EQ(a.length(0), 23);
  EXPECT_EQ(a.length(2), 25);
  EXPECT_EQ(mismatches(a.keys(2).slice_flat(0, {5 * H * D}), kb.view({5 * H * D})), 0);
  // reserve_tokens sizes the storage once: appends up to it keep the same storage; before the
  // first append it is taken when the layout is known; a joined cache keeps the larger room.
  KvCache r;
  r.reserve_tokens(40);
  r.append(keys(2, 3, 70), keys(2, 3, 71));
  EXPECT_EQ(r.capacity(), 40);
  const void* storage = r.keys(0).raw_data();
  for (int i = 0; i < 37; ++i) r.append(keys(2, 1, 80 + i), keys(2, 1, 120 + i));
  EXPECT_EQ(r.capacity(), 40);
  EXPECT_EQ(r.keys(0).raw_data(), storage);
  r.append(keys(2, 1, 200), keys(2, 1, 201));  // one past the room: grows by doubling
  EXPECT_EQ(r.capacity(), 80);
  EXPECT_EQ(r.length(1), 41);
  // Queries beyond a sequence's length are refused, naming it.
  KvCache c;
  c.append(keys(1, 2, 5), keys(1, 2, 6));
  KvCache d;
  d.append(keys(1, 4, 7), keys(1, 4, 8));
  c.append_rows(d);
  EXPECT_THROW(c.attend(amor::testing::randn({2, 3, H, D}, 9), Tensor()), Error);
  // attend over some sequences only: theirs as the full attend gives them, the others' zeros.
  {
    const Tensor q = amor::testing::randn({3, 2, H, D}, 15);
    const Tensor full = a.attend(q, Tensor());
    const std::vector<int64_t> some = {0, 2};
    const Tensor part = a.attend(q, Tensor(), &some);
    const int64_t n = 2 * H * D;
    for (int64_t b = 0; b < 3; ++b) {
      const Tensor got = part.slice_flat(b * n, {n});
      const Tensor want = b == 1 ? Tensor::zeros({n}, DType::F64) : full.slice_flat(b * n, {n});
      EXPECT_EQ(mismatches(got, want), 0) << "sequence " << b;
    }
    const std::vector<int64_t> unsorted = {2, 0};
    EXPECT_THROW(a.attend(q, Tensor(), &unsorted), Error);
  }
  // Keys of another layout do not join.
  KvCache e;
  e.append(amor::testing::randn({1, 2, H, D + 2}, 11), amor::testing::randn({1, 2, H, D + 2}, 12));
  EXPECT_THROW(c.append_rows(e), Error);
}

}  // namespace
}  // namespace amor::model
