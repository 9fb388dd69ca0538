// Oryx's mode assignment: training modes are deterministic per seed, constant over each chunk and
// attention at rate p_attention; inference schedules give the documented rows; bad keys are errors
// naming model.oryx.<key>.
#include "models/oryx/oryx_modes.h"

#include <gtest/gtest.h>

namespace amor::model {
namespace {

std::string row(const Tensor& m, int64_t b) {
  std::string s;
  for (int64_t t = 0; t < m.size(1); ++t) s += m.data<uint8_t>()[b * m.size(1) + t] ? '1' : '0';
  return s;
}

OryxConfig cfg(int64_t chunk, double p, const std::string& schedule = "attention") {
  OryxConfig c;
  c.chunk = chunk;
  c.p_attention = p;
  c.schedule = schedule;
  return c;
}

TEST(OryxModes, TrainingModesAreDeterministicPerSeed) {
  std::mt19937_64 a(7), b(7), c(8);
  Tensor ma = oryx_training_modes(cfg(4, 0.5), 8, 64, a);
  Tensor mb = oryx_training_modes(cfg(4, 0.5), 8, 64, b);
  Tensor mc = oryx_training_modes(cfg(4, 0.5), 8, 64, c);
  EXPECT_EQ(ma.shape(), Shape({8, 64}));
  EXPECT_EQ(ma.dtype(), DType::U8);
  EXPECT_EQ(ma.to_vector<uint8_t>(), mb.to_vector<uint8_t>());
  EXPECT_NE(ma.to_vector<uint8_t>(), mc.to_vector<uint8_t>());
  // The generator moved on: the next call draws new modes.
  EXPECT_NE(oryx_training_modes(cfg(4, 0.5), 8, 64, a).to_vector<uint8_t>(),
            ma.to_vector<uint8_t>());
}

TEST(OryxModes, TrainingModesAreConstantOverEachChunkIncludingTheLastPartialOne) {
  std::mt19937_64 rng(1);
  const int64_t B = 16, T = 23, chunk = 5;  // chunks [0,5) .. [20,23)
  Tensor m = oryx_training_modes(cfg(chunk, 0.5), B, T, rng);
  int changes_inside = 0, mixed_rows = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::string r = row(m, b);
    for (int64_t t = 1; t < T; ++t)
      if (t % chunk != 0 && r[t] != r[t - 1]) ++changes_inside;
    mixed_rows += r.find('0') != std::string::npos && r.find('1') != std::string::npos;
  }
  EXPECT_EQ(changes_inside, 0);
  EXPECT_GT(mixed_rows, 0);  // chunks of one sequence do get different mixers
}

TEST(OryxModes, TrainingAttentionRateIsPAttention) {
  for (double p : {0.1, 0.5, 0.8}) {
    std::mt19937_64 rng(42);
    Tensor m = oryx_training_modes(cfg(128, p), 64, 128 * 64, rng);  // 4096 coins
    double rate = 0;
    for (uint8_t v : m.to_vector<uint8_t>()) rate += v;
    rate /= static_cast<double>(m.numel());
    EXPECT_NEAR(rate, p, 0.03) << p;  // > 4 standard deviations
  }
  std::mt19937_64 rng(3);
  for (uint8_t v : oryx_training_modes(cfg(3, 0.0), 4, 20, rng).to_vector<uint8_t>())
    EXPECT_EQ(v, 0);
  for (uint8_t v : oryx_training_modes(cfg(3, 1.0), 4, 20, rng).to_vector<uint8_t>())
    EXPECT_EQ(v, 1);
}

TEST(OryxModes, InferenceSchedules) {
  auto modes = [](const std::string& s, int64_t T, int64_t prefill = 0) {
    Tensor m = oryx_inference_modes(cfg(4, 0.5, s), 2, T, prefill);
    EXPECT_EQ(row(m, 0), row(m, 1));
    return row(m, 0);
  };
  EXPECT_EQ(modes("attention", 6), "111111");
  EXPECT_EQ(modes("linear", 6), "000000");
  EXPECT_EQ(modes("prefill_linear_decode_attention", 9, 5), "000001111");
  EXPECT_EQ(modes("prefill_linear_decode_attention", 4, 9), "0000");
  EXPECT_EQ(modes("prefill_linear_decode_attention", 4, 0), "1111");
  EXPECT_EQ(modes("linear:3,attention:2,linear:*", 9), "000110000");
  EXPECT_EQ(modes("linear:3,attention:2,linear:*", 4), "0001");
  EXPECT_EQ(modes("attention:2,linear:*", 2), "11");
  EXPECT_EQ(modes("linear:2,attention:1", 8), "00100100");  // no "*": the list repeats
  EXPECT_EQ(modes(" linear : 2 , attention:* ", 5), "00111");
  EXPECT_EQ(modes("attention:100", 3), "111");
  EXPECT_EQ(oryx_inference_modes(cfg(4, 0.5, "linear:1,attention:*"), 1, 0, 0).numel(), 0);
  auto segs = parse_oryx_segments("linear:512,attention:128,linear:*");
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_FALSE(segs[0].attention);
  EXPECT_EQ(segs[0].length, 512);
  EXPECT_TRUE(segs[1].attention);
  EXPECT_EQ(segs[2].length, -1);
}

template <class F>
void expect_error_naming(F f, const std::string& key) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(OryxModes, BadKeysAreErrorsNamingThem) {
  for (const char* s : {"", "  ", "bogus", "linear3", "linear:0", "linear:-3", "linear:x",
                        "linear:1.5", "sideways:3", "linear:*,attention:2", "linear:3,",
                        ",linear:3", "linear:99999999999999999999"}) {
    expect_error_naming([&] { validate_oryx_config(cfg(4, 0.5, s)); }, "model.oryx.schedule");
    expect_error_naming([&] { oryx_inference_modes(cfg(4, 0.5, s), 1, 8, 0); },
                        "model.oryx.schedule");
  }
  expect_error_naming(
      [&] { oryx_inference_modes(cfg(4, 0.5, "prefill_linear_decode_attention"), 1, 8, -1); },
      "model.oryx.schedule");
  std::mt19937_64 rng(0);
  expect_error_naming([&] { oryx_training_modes(cfg(0, 0.5), 1, 8, rng); }, "model.oryx.chunk");
  expect_error_naming([&] { oryx_training_modes(cfg(4, 1.5), 1, 8, rng); },
                      "model.oryx.p_attention");
  expect_error_naming([&] { oryx_training_modes(cfg(4, -0.1), 1, 8, rng); },
                      "model.oryx.p_attention");
  OryxConfig c = cfg(4, 0.5);
  c.linear = "rwkv";
  expect_error_naming([&] { validate_oryx_config(c); }, "model.oryx.linear");
  for (const char* s : {"attention", "linear", "prefill_linear_decode_attention",
                        "linear:512,attention:128,linear:*"})
    EXPECT_NO_THROW(validate_oryx_config(cfg(128, 0.5, s))) << s;
}

}  // namespace
}  // namespace amor::model
