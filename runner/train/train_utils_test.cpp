#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>

#include "data/synthetic/token_roles.h"
#include "data/synthetic/token_task.h"
#include "kernels/core/error.h"
#include "runner/config/run_config.h"
#include "runner/train/data_setup.h"
#include "runner/train/lr_schedule.h"
#include "runner/train/progress.h"
#include "runner/train/stop_signal.h"

namespace amor {
namespace {

TEST(LrSchedule, WarmupThenCosineToTheFloor) {
  EXPECT_DOUBLE_EQ(lr_at(0, 100, 10, 1.0, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(9, 100, 10, 1.0, 0.1), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(10, 100, 10, 1.0, 0.1), 1.0);   // first step after warmup: the peak
  EXPECT_NEAR(lr_at(99, 100, 10, 1.0, 0.1), 0.1, 1e-15);  // last step: the floor
  // Half way through the decay: the mean of peak and floor.
  EXPECT_NEAR(lr_at(10 + 89 / 2.0, 100, 10, 1.0, 0.1), 0.55, 0.02);
  for (int64_t s = 10; s < 99; ++s) EXPECT_GE(lr_at(s, 100, 10, 1.0, 0.1), lr_at(s + 1, 100, 10, 1.0, 0.1));
  EXPECT_DOUBLE_EQ(lr_at(0, 1, 0, 2.0, 0.1), 2.0);  // a one-step run trains at the peak
}

// MQAR at 32 positions with 4 pairs, 8 training and 4 validation examples, micro-batch 4.
config::RunConfig mqar_run_config() {
  config::RunConfig cfg;
  cfg.model.vocab = 256;
  cfg.data.source = "mqar";
  cfg.data.seq_len = 32;
  cfg.data.mqar.num_kv_pairs = 4;
  cfg.data.mqar.num_train = 8;
  cfg.data.mqar.num_valid = 4;
  cfg.train.micro_batch = 4;
  return cfg;
}

// data.mqar.layout lm: training batches target every next token; validation batches keep the
// targets at the queries only (so validation scores recall), with each query's value after it.
TEST(MqarLayout, LmTrainsEveryNextTokenAndValidatesTheQueries) {
  config::RunConfig cfg = mqar_run_config();
  for (const std::string layout : {"zoology", "lm"}) {
    cfg.data.mqar.layout = layout;
    RunData d = make_run_data(cfg, 0, 1);
    const model::Batch train = d.train->next(), valid = d.valid->next();
    const auto xt = train.tokens.to_vector<int32_t>(), yt = train.targets.to_vector<int32_t>();
    const auto xv = valid.tokens.to_vector<int32_t>(), yv = valid.targets.to_vector<int32_t>();
    const int64_t T = 32;
    for (int64_t b = 0; b < 4; ++b) {
      int64_t labelled = 0;
      for (int64_t t = 0; t < T; ++t) {
        const size_t i = static_cast<size_t>(b * T + t);
        if (layout == "lm")
          EXPECT_EQ(yt[i], t + 1 < T ? xt[i + 1] : synthetic::kIgnore) << layout << " position " << t;
        labelled += yv[i] != synthetic::kIgnore;
        if (layout == "lm" && yv[i] != synthetic::kIgnore) EXPECT_EQ(xv[i + 1], yv[i]) << "the answer follows";
      }
      EXPECT_EQ(labelled, 4) << layout << ": validation targets only the queries";
      const auto roles = d.roles(std::span<const int32_t>(xv.data() + b * T, T),
                                 std::span<const int32_t>(yv.data() + b * T, T));
      const auto answers = std::count(roles.begin(), roles.end(), static_cast<uint8_t>(synthetic::TokenRole::Answer));
      EXPECT_EQ(answers, layout == "lm" ? 4 : 0) << layout;
    }
  }
}

// data.mqar.pair_targets false (lm layout): training batches have no target over the pairs and
// the next token everywhere after them; validation still targets only the queries.
TEST(MqarLayout, LmWithoutPairTargetsTrainsFromTheFirstQuery) {
  config::RunConfig cfg = mqar_run_config();
  cfg.data.mqar.layout = "lm";
  cfg.data.mqar.pair_targets = false;
  RunData d = make_run_data(cfg, 0, 1);
  const model::Batch train = d.train->next(), valid = d.valid->next();
  const auto xt = train.tokens.to_vector<int32_t>(), yt = train.targets.to_vector<int32_t>();
  const auto yv = valid.targets.to_vector<int32_t>();
  const int64_t T = 32;
  for (int64_t b = 0; b < 4; ++b) {
    int64_t labelled = 0;
    for (int64_t t = 0; t < T; ++t) {
      const size_t i = static_cast<size_t>(b * T + t);
      EXPECT_EQ(yt[i], t >= 8 && t + 1 < T ? xt[i + 1] : synthetic::kIgnore) << "position " << t;
      labelled += yv[i] != synthetic::kIgnore;
    }
    EXPECT_EQ(labelled, 4) << "validation targets only the queries";
  }
}

TEST(StopSignal, SigtermAndTheUserSignalSetTheFlag) {
  clear_stop_request();
  install_stop_handlers("SIGUSR1");
  EXPECT_FALSE(stop_requested());
  std::raise(SIGUSR1);
  EXPECT_TRUE(stop_requested());
  EXPECT_EQ(stop_signal_name(), "SIGUSR1");
  clear_stop_request();
  std::raise(SIGTERM);
  EXPECT_EQ(stop_signal_name(), "SIGTERM");
  clear_stop_request();
  EXPECT_THROW(install_stop_handlers("SIGHUP"), Error);
}

TEST(Progress, PlainLinesInALogAtEachInterval) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    Progress p("run-a", 20, 10, f, /*force_tty=*/false);
    for (int64_t s = 1; s <= 20; ++s) p.update({s, 2.5, 1e-3, 1500.0, {{"fire", 0.25}}});
    p.finish("done");
  }
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;  // steps 10, 20, and "done"
  EXPECT_NE(out.find("run-a step 10/20  loss 2.5000  lr 1.0e-03  1.5k tok/s  fire 0.250  ETA"),
            std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(Progress::format_duration(3725), "1h02m");
  EXPECT_EQ(Progress::format_duration(200), "3m20s");
  EXPECT_EQ(Progress::format_duration(42), "42s");
}

// The live bar only for one group on a terminal outside a Slurm job; AMOR_PROGRESS forces either.
TEST(Progress, LiveBarOnlyOnATerminalOutsideSlurm) {
  ProgressContext c;
  c.stdout_terminal = true;
  EXPECT_TRUE(live_progress(c));
  c.slurm_job = true;  // SLURM_JOB_ID set: plain lines even where the ranks get a pseudo-terminal
  EXPECT_FALSE(live_progress(c));
  c.mode = "live";
  EXPECT_TRUE(live_progress(c));
  c = {};
  c.stdout_terminal = false;  // stdout is a file or a pipe
  EXPECT_FALSE(live_progress(c));
  c.stdout_terminal = true;
  c.groups = 2;  // two groups' bars would interleave
  EXPECT_FALSE(live_progress(c));
  c.groups = 1;
  c.mode = "plain";
  EXPECT_FALSE(live_progress(c));
}

TEST(Progress, LiveBarRewritesOneLine) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    Progress p("run-a", 4, 10, f, /*force_tty=*/true);
    for (int64_t s = 1; s <= 4; ++s) p.update({s, 2.5, 1e-3, 1500.0, {}});
    p.finish("done");
  }
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 5) << out;  // every step, then the finish
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("[############]"), std::string::npos) << out;
}

}  // namespace
}  // namespace amor
