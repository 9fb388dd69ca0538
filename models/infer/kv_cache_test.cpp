// KvCache's step path (kv_cache.h: one token per sequence with the lengths on the device, what a
// CUDA graph of a decode step replays) against its host path, on the cpu, where the step path
// runs the new ops' cpu references (KvCache::use_step_path_on_cpu): the same keys, lengths and
// attention bit for bit; the device lengths follow the host mirror through prefills, joins and
// regrowth; a replay (the kernel run without the host code, then replayed()) leaves the cache as
// an eager step does; room and the graph signature. Then every kind with attention decoded on the
// step path equals the host path bitwise, and LanguageModel::replayed_step advances every cache.
#include "models/infer/kv_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/kv_append/kv_append.h"
#include "models/infer/infer_test_support.h"
#include "tests/common/on_off_switch.h"

namespace amor::model {
namespace {

using namespace testing_infer;
using amor::testing::randn;

// The step path on the cpu for a scope.
struct StepPathOnCpu {
  explicit StepPathOnCpu(bool on = true) { KvCache::use_step_path_on_cpu(on); }
  ~StepPathOnCpu() { KvCache::use_step_path_on_cpu(false); }
};

constexpr int64_t H = 2, Hkv = 1, D = 4;
Tensor toks(int64_t B, int64_t T, uint64_t seed) { return randn({B, T, Hkv, D}, seed); }

void expect_same_cache(const KvCache& a, const KvCache& b) {
  ASSERT_EQ(a.sequences(), b.sequences());
  for (int64_t s = 0; s < a.sequences(); ++s) {
    ASSERT_EQ(a.length(s), b.length(s)) << "sequence " << s;
    EXPECT_EQ(mismatches(a.keys(s), b.keys(s)), 0) << "sequence " << s;
    EXPECT_EQ(mismatches(a.values(s), b.values(s)), 0) << "sequence " << s;
  }
}

std::vector<int64_t> host_lengths(const KvCache& c) {
  std::vector<int64_t> v;
  for (int64_t s = 0; s < c.sequences(); ++s) v.push_back(c.length(s));
  return v;
}

std::vector<int64_t> device_lengths(const KvCache& c) {
  std::vector<int64_t> v;
  for (int32_t n : c.device_lengths().to(Device::CPU).to_vector<int32_t>()) v.push_back(n);
  return v;
}

// Two sequences prefilled with 3 tokens and one with `third` tokens, prefilled apart and joined.
KvCache joined_cache(int64_t third) {
  KvCache a, b;
  a.append(toks(2, 3, 1), toks(2, 3, 2));
  b.append(toks(1, third, 3), toks(1, third, 4));
  a.append_rows(b);
  return a;
}

// One decode step of an attention over the cache, as the mixers run it: q and k rotated at the
// next positions, k and v appended, q attends (with a gate that leaves some rows off).
Tensor step(KvCache& c, uint64_t seed, const Tensor& gate = Tensor()) {
  const int64_t B = c.sequences();
  Tensor q = c.rotate_next(randn({B, 1, H, D}, seed), 10000.0);
  c.append(c.rotate_next(toks(B, 1, seed + 1), 10000.0), toks(B, 1, seed + 2));
  return c.attend(q, gate);
}

// Prefilled apart and joined (sequences at 3, 3 and 5 tokens), then stepped: the step path gives
// the host path's rotations, rows, lengths and attention exactly, its device lengths follow the
// host mirror (the joined cache's count, the prefill after a step's upload, regrowth), and a
// prefill between steps (T > 1: the host path) is picked up by the next step.
TEST(KvCacheStepPath, EqualsTheHostPathOnTheCpu) {
  KvCache host = joined_cache(5), dev = joined_cache(5);
  EXPECT_FALSE(host.step_path(1));
  {
    StepPathOnCpu on;
    EXPECT_TRUE(dev.step_path(1));
    EXPECT_FALSE(dev.step_path(2));
    EXPECT_FALSE(KvCache().step_path(1));  // no layout yet
  }
  const Tensor gate = Tensor::from_vector<uint8_t>({3, 1}, {1, 0, 1});
  for (int i = 0; i < 14; ++i) {  // past the first capacity of 16 rows: regrows by doubling
    SCOPED_TRACE("step " + std::to_string(i));
    const Tensor g = i % 3 == 1 ? gate : Tensor();
    const Tensor want = step(host, 100 + 10 * uint64_t(i), g);
    Tensor got;
    {
      StepPathOnCpu on;
      got = step(dev, 100 + 10 * uint64_t(i), g);
      EXPECT_EQ(device_lengths(dev), host_lengths(dev));
    }
    EXPECT_EQ(mismatches(got, want), 0);
    expect_same_cache(dev, host);
    if (i == 6) {  // a prefill of two tokens in between (the host path)
      host.append(toks(3, 2, 900), toks(3, 2, 901));
      dev.append(toks(3, 2, 900), toks(3, 2, 901));
    }
  }
  EXPECT_EQ(dev.capacity(), 32);
  // Reads before any token are refused.
  EXPECT_THROW(KvCache().device_lengths(), Error);
}

// append_qkv_step (the fused step of an AMOR block's dense form): one projection's [B,1,(H + 2Hkv)D]
// output gives the Q that rotate_next gives and leaves the cache as rotate_next + append do, bit for
// bit, over joined sequences of different lengths and through a regrowth; off the step path (the
// host path, or a prefill of two tokens) it is refused.
TEST(KvCacheStepPath, FusedQkvStepEqualsRotateAndAppend) {
  KvCache parts = joined_cache(6), fused = joined_cache(6);
  const int64_t B = 3, n = (H + 2 * Hkv) * D;
  StepPathOnCpu on;
  for (int i = 0; i < 12; ++i) {  // past the first capacity of 16 rows
    SCOPED_TRACE("step " + std::to_string(i));
    const Tensor qkv = randn({B, 1, n}, 300 + uint64_t(i));
    Tensor q = Tensor::empty({B, 1, H, D}, qkv.dtype()), k = toks(B, 1, 0), v = toks(B, 1, 0);
    for (int64_t b = 0; b < B; ++b) {  // the three heads' blocks of each row
      q.slice_flat(b * H * D, {H * D}).copy_from(qkv.slice_flat(b * n, {H * D}));
      k.slice_flat(b * Hkv * D, {Hkv * D}).copy_from(qkv.slice_flat(b * n + H * D, {Hkv * D}));
      v.slice_flat(b * Hkv * D, {Hkv * D}).copy_from(qkv.slice_flat(b * n + (H + Hkv) * D, {Hkv * D}));
    }
    const Tensor want = parts.rotate_next(q, 10000.0);
    parts.append(parts.rotate_next(k, 10000.0), v);
    const Tensor got = fused.append_qkv_step(qkv, H, 10000.0);
    EXPECT_EQ(got.shape(), (Shape{B, 1, H, D}));
    EXPECT_EQ(mismatches(got, want), 0);
    expect_same_cache(fused, parts);
    EXPECT_EQ(device_lengths(fused), host_lengths(fused));
  }
  EXPECT_EQ(fused.capacity(), 32);
  EXPECT_THROW(fused.append_qkv_step(randn({B, 2, n}, 9), H, 10000.0), Error);  // two tokens
  EXPECT_THROW(fused.append_qkv_step(randn({2, 1, n}, 9), H, 10000.0), Error);  // two sequences
  KvCache::use_step_path_on_cpu(false);
  EXPECT_THROW(fused.append_qkv_step(randn({B, 1, n}, 9), H, 10000.0), Error);  // the host path
}

// A replay runs the step's kernels without its host code: kv_append_step on the storage at the
// device lengths, then replayed(1) advances the host mirror. The cache is then the one an eager
// step leaves, and the next eager step continues from it. Without room a replay is refused.
TEST(KvCacheStepPath, ReplayedStepEqualsAnEagerOne) {
  StepPathOnCpu on;
  KvCache eager, replay;
  for (KvCache* c : {&eager, &replay}) {
    c->reserve_tokens(6);
    c->append(toks(2, 3, 1), toks(2, 3, 2));
  }
  const Tensor k = toks(2, 1, 5), v = toks(2, 1, 6);
  eager.append(k, v);
  kv_append_step(replay.key_storage(), replay.value_storage(), k, v, replay.device_lengths());
  EXPECT_EQ(replay.length(0), 3);  // the host mirror has not moved yet
  replay.replayed(1);
  expect_same_cache(replay, eager);
  EXPECT_EQ(device_lengths(replay), host_lengths(replay));
  EXPECT_EQ(mismatches(step(replay, 50), step(eager, 50)), 0);
  expect_same_cache(replay, eager);
  // 5 of 6 rows: room for one more, not two; at 6 none, and a replay is refused.
  EXPECT_TRUE(replay.has_room(1));
  EXPECT_FALSE(replay.has_room(2));
  kv_append_step(replay.key_storage(), replay.value_storage(), k, v, replay.device_lengths());
  replay.replayed(1);
  EXPECT_FALSE(replay.has_room(1));
  EXPECT_THROW(replay.replayed(1), Error);
  EXPECT_THROW(replay.replayed(2), Error);
  EXPECT_FALSE(KvCache().has_room(1));
}

// What a captured step reads at fixed addresses: the same while steps fit the storage, another
// after the storage regrows (the step that outgrows it) or a reserve_tokens moves it.
TEST(KvCacheStepPath, GraphSignatureChangesWhenTheStorageMoves) {
  StepPathOnCpu on;
  KvCache c;
  c.reserve_tokens(5);
  c.append(toks(2, 3, 1), toks(2, 3, 2));
  step(c, 10);  // the device lengths exist from the first step on
  auto sig = [&] {
    std::vector<uintptr_t> s;
    c.graph_signature(s);
    return s;
  };
  const std::vector<uintptr_t> first = sig();
  EXPECT_EQ(first.size(), 5u);
  step(c, 20);  // the fifth row: the storage stays
  EXPECT_EQ(sig(), first);
  EXPECT_FALSE(c.has_room(1));
  step(c, 30);  // outgrows it: doubled
  EXPECT_EQ(c.capacity(), 16);  // max(6, 2 * 5, 16)
  EXPECT_NE(sig(), first);
  const std::vector<uintptr_t> second = sig();
  c.reserve_tokens(40);
  EXPECT_NE(sig(), second);
}

// Every kind with attention decoded on the step path (all of its KV caches: attention layers,
// fused pairs, Oryx, AMOR's blocks in both forms) equals the host path bitwise on the cpu.
TEST(KvCacheStepPath, EveryKindDecodesAsOnTheHostPath) {
  for (const KindCase& kc : all_kinds()) {
    for (bool sparse : {true, false}) {
      if (!sparse && kc.cfg.kind != "amor") continue;
      SCOPED_TRACE(kc.name + (sparse ? "" : " (dense AMOR)"));
      auto m = make_model(kc.cfg, DType::F64, 5);
      if (auto* amor = dynamic_cast<AmorModel*>(m.get())) amor->set_sparse_inference(sparse);
      const int64_t B = 2, T = 9;
      Batch batch;
      batch.tokens = amor::testing::randint({B, T}, 6, kc.cfg.vocab);
      batch.targets = amor::testing::randint({B, T}, 7, kc.cfg.vocab);
      const Decoded want = decode(*m, batch, {3});
      Decoded got;
      {
        StepPathOnCpu on;
        got = decode(*m, batch, {3});
      }
      EXPECT_EQ(mismatches(got.out.predictions, want.out.predictions), 0);
      EXPECT_EQ(max_rel_diff(got.out.entropy, want.out.entropy), 0.0);
      EXPECT_EQ(max_rel_diff(got.out.token_loss, want.out.token_loss), 0.0);
      for (size_t k = 0; k < want.out.gates.size(); ++k) {
        EXPECT_EQ(mismatches(got.out.gates[k], want.out.gates[k]), 0);
        EXPECT_EQ(max_rel_diff(got.out.gate_entropy[k], want.out.gate_entropy[k]), 0.0);
      }
    }
  }
}

// replayed_step advances the state's lengths and every KV cache's host mirror (after a replay
// advanced their device lengths: here each cache's kernel run by hand); the state's signature
// lists every cache, and kv_room asks them all.
TEST(KvCacheStepPath, ReplayedStepAdvancesEveryCache) {
  StepPathOnCpu on;
  struct Want {
    const char* name;
    ModelConfig cfg;
    size_t caches;
  };
  ModelConfig serial = tiny("serial");
  serial.pattern = "MA";
  ModelConfig fused = tiny("fused");
  fused.fused_linear = "gdn";
  const std::vector<Want> kinds = {{"transformer", tiny("transformer"), 2},
                                   {"serial_MA", serial, 1},
                                   {"fused", fused, 2},
                                   {"mamba2", tiny("mamba2"), 0},
                                   {"amor_gdn_K3", tiny_amor("gdn", 3), 3}};
  for (const Want& w : kinds) {
    SCOPED_TRACE(w.name);
    auto m = make_model(w.cfg, DType::F64, 3);
    std::unique_ptr<InferenceState> s = m->new_inference_state(2);
    s->reserve_tokens(8);
    m->infer(amor::testing::randint({2, 4}, 1, w.cfg.vocab), Tensor(), *s);
    m->infer(amor::testing::randint({2, 1}, 2, w.cfg.vocab), Tensor(), *s);  // a step: device lengths
    std::vector<KvCache*> caches;
    s->kv_caches(caches);
    ASSERT_EQ(caches.size(), w.caches);
    EXPECT_EQ(s->graph_signature().size(), 5 * w.caches);
    EXPECT_TRUE(s->kv_room(3));
    EXPECT_EQ(s->kv_room(4), w.caches == 0);
    for (KvCache* c : caches) {
      const Tensor k = Tensor::zeros({2, 1, c->key_storage().size(2), c->key_storage().size(3)}, DType::F64);
      kv_append_step(c->key_storage(), c->value_storage(), k, k, c->device_lengths());
    }
    m->replayed_step(*s, 1);
    EXPECT_EQ(s->length(), 6);
    for (KvCache* c : caches) {
      EXPECT_EQ(host_lengths(*c), (std::vector<int64_t>{6, 6}));
      EXPECT_EQ(device_lengths(*c), host_lengths(*c));
    }
  }
}

// AMOR_KV_STEP_PATH (read through env_choice): unset, "" and "1" on (the default since the GPU
// tests passed on the H200), "0" off, anything else refused naming the variable and the value; the setting can be
// switched for a scope (the GPU tests run the step path so).
TEST(KvCacheStepPath, GpuSwitchParsedAndScoped) {
  amor::testing::expect_on_off_switch("AMOR_KV_STEP_PATH", [] { return KvCache::read_step_path_switch(); });
  const bool before = KvCache::step_path_on_gpu();
  {
    testing_infer::StepPathOnGpu on(true);
    EXPECT_TRUE(KvCache::step_path_on_gpu());
    {
      testing_infer::StepPathOnGpu off(false);
      EXPECT_FALSE(KvCache::step_path_on_gpu());
    }
    EXPECT_TRUE(KvCache::step_path_on_gpu());
  }
  EXPECT_EQ(KvCache::step_path_on_gpu(), before);
  EXPECT_NE(kv_step_path_off_blocker("transformer").find("AMOR_KV_STEP_PATH=0"), std::string::npos);
}

}  // namespace
}  // namespace amor::model
