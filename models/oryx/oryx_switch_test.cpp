// Oryx: both memories see every token whatever its mode (design §3). In one layer, with modes
// switching attention -> linear and linear -> attention inside a sequence, the output at every
// token equals that token's output in the run where every token is in its mode (all attention,
// or all linear): the mode-X output computed from the keys and values of ALL earlier tokens,
// including those that were in the other mode. Exactly, in double and float, for both linear
// kinds. A perturbation check shows the earlier other-mode tokens really are read.
#include <gtest/gtest.h>

#include <string>

#include "models/oryx/oryx_mixer.h"
#include "models/oryx/oryx_test_support.h"
#include "tests/common/random.h"

namespace amor::model {
namespace {

using testing_oryx::modes_of;
using testing_oryx::tiny_oryx;

struct Layer1 {
  ParamStore ps;
  OryxMixer mixer;
  Layer1(const ModelConfig& cfg, DType dt, uint64_t seed) : ps(dt), mixer(ps, "mixer", cfg) {
    ps.initialize(seed);
  }
  Tensor run(const Tensor& x, const std::string& seq0, const std::string& seq1) {
    MixerContext ctx;
    ctx.modes = modes_of({seq0, seq1});
    return mixer.forward(x, ctx);
  }
};

// Row t of sequence b of y [B,T,d] as doubles.
std::vector<double> row(const Tensor& y, int64_t b, int64_t t) {
  const int64_t T = y.size(1), d = y.size(2);
  std::vector<double> r(static_cast<size_t>(d));
  for (int64_t c = 0; c < d; ++c) r[static_cast<size_t>(c)] = y.item((b * T + t) * d + c);
  return r;
}

// Sequence 0 is [L L L A A A L L], sequence 1 the opposite [A A A L L L A A]: each switches in
// both directions.
const std::string kSeq0 = "00011100", kSeq1 = "11100011";

TEST(OryxSwitch, EachTokensOutputIsItsModesOutputOverAllEarlierTokens) {
  for (const char* kind : {"gdn", "mamba2"}) {
    for (DType dt : {DType::F64, DType::F32}) {
      SCOPED_TRACE(std::string(kind) + (dt == DType::F64 ? " f64" : " f32"));
      ModelConfig cfg = tiny_oryx(kind);
      Layer1 l(cfg, dt, 7);
      Tensor x = testing::randn({2, 8, cfg.d_model}, 8, dt);
      Tensor mixed = l.run(x, kSeq0, kSeq1);
      Tensor attn = l.run(x, "11111111", "11111111");
      Tensor lin = l.run(x, "00000000", "00000000");
      for (int64_t b = 0; b < 2; ++b) {
        const std::string& seq = b == 0 ? kSeq0 : kSeq1;
        for (int64_t t = 0; t < 8; ++t) {
          const Tensor& want = seq[static_cast<size_t>(t)] == '1' ? attn : lin;
          EXPECT_EQ(row(mixed, b, t), row(want, b, t)) << "sequence " << b << " token " << t;
          // and not trivially: the two mixers give different outputs at this token
          EXPECT_NE(row(attn, b, t), row(lin, b, t)) << "sequence " << b << " token " << t;
        }
      }
    }
  }
}

// Perturbing one token changes the later outputs of the other mode: the attention rows after a
// linear stretch read its keys and values, and the linear rows after an attention stretch carry
// it in their state.
TEST(OryxSwitch, OtherModeTokensAreRead) {
  for (const char* kind : {"gdn", "mamba2"}) {
    SCOPED_TRACE(kind);
    ModelConfig cfg = tiny_oryx(kind);
    Layer1 l(cfg, DType::F64, 9);
    Tensor x = testing::randn({2, 8, cfg.d_model}, 10);
    Tensor y = l.run(x, kSeq0, kSeq1);
    for (int64_t b = 0; b < 2; ++b) {
      // Token 1 is linear in sequence 0 and attention in sequence 1; tokens 3..5 are the other
      // mode; tokens 6, 7 the mode of token 1 again.
      Tensor xp = x.clone();
      const int64_t d = cfg.d_model;
      for (int64_t c = 0; c < d; ++c) xp.set_item((b * 8 + 1) * d + c, x.item((b * 8 + 1) * d + c) + 0.5);
      Tensor yp = l.run(xp, kSeq0, kSeq1);
      for (int64_t t : {3, 4, 5, 6, 7})
        EXPECT_NE(row(yp, b, t), row(y, b, t)) << "sequence " << b << " token " << t;
      EXPECT_EQ(row(yp, b, 0), row(y, b, 0)) << "causal";
      EXPECT_EQ(row(yp, 1 - b, 4), row(y, 1 - b, 4)) << "the other sequence";
    }
  }
}

}  // namespace
}  // namespace amor::model
