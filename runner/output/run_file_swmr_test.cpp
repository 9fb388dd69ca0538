// run.h5 with a live writer (a forked child process, as rank 0 of a run): h5py reads it with
// swmr=True while rows are appended, and after the writer is killed (kill -9) the file reopens for
// the resumed run, dropping the rows after the checkpoint, even while a reader holds it open.
#include "runner/output/run_file_test_util.h"

namespace amor {
namespace {

// A training process (forked child) appends and flushes a row every few milliseconds; h5py opens
// the file with swmr=True meanwhile and watches /train grow. Then the child finishes cleanly.
TEST_F(RunFileTest, ReaderWithSwmrSeesRowsGrowWhileTheRunWrites) {
  const std::string file = path("run.h5"), stop = path("stop");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    try {
      RunFile f = RunFile::create(file, attrs_for("gdn"), amor_layout());
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      for (int64_t s = 1; !fs::exists(stop); ++s) {
        f.append_train(formula_row(s, 3));
        f.flush();
        if (std::chrono::steady_clock::now() > give_up) throw Error("never told to stop");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      f.finish(utc_timestamp());
      f.close();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "writer: %s\n", e.what());
      rc = 1;
    }
    ::_exit(rc);
  }
  int reader = python("swmr " + file + " 15");
  write_text(stop, "");
  EXPECT_EQ(reap(pid, 20), 0);
  EXPECT_EQ(reader, 0);

  // Afterwards: every row in order, and the finish time set.
  h5::silence_errors();
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  {
    h5::Handle ds = h5::open_dataset(f, "/train/step");
    std::vector<int64_t> steps = h5::read_1d<int64_t>(ds.get());
    ASSERT_GE(steps.size(), 20u);
    for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], static_cast<int64_t>(i + 1));
    std::string finished = h5::read_string_attr(f, "finished");
    EXPECT_EQ(finished.size(), 20u) << finished;
  }
  H5Fclose(f);
}

// kill -9 while the run writes: the file reopens (HDF5's "still open for writing" flags cleared),
// rows after the checkpoint step are dropped, and the resumed run continues without duplicates.
TEST_F(RunFileTest, ResumeAfterTheWriterWasKilled) {
  const std::string file = path("run.h5"), ready = path("ready");
  RunLayout L = amor_layout();
  RunAttrs A = attrs_for("amor-gdn-180m");
  std::mt19937 rng(5);
  TokenSequences toks = random_sequences(rng, {7, 2}, 3, true);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      RunFile f = RunFile::create(file, A, L);
      for (int64_t s = 1;; ++s) {
        f.append_train(formula_row(s, 3));
        if (s == 20) f.write_eval("mqar", 20, {{"accuracy", 0.5}, {"loss", 2.0}}, {{"correct", {1, 0}}});
        if (s == 45) {
          f.write_eval("mqar", 45, {{"accuracy", 0.75}, {"loss", 1.0}}, {{"correct", {1, 1}}});
          f.write_tokens("validation", 45, toks);
        }
        f.flush();
        if (s == 50) write_text(ready, "");
        if (s > 50) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        if (s > 20000) break;  // the parent never came: stop
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "writer: %s\n", e.what());
    }
    ::_exit(1);
  }
  bool got_ready = wait_for_file(ready, 20);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(got_ready);
  ASSERT_TRUE(WIFSIGNALED(status));

  // A notebook has the file open (swmr=True) across the restart; it must not block the resume.
  const std::string held = path("held"), release = path("release");
  pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    std::string script = std::string(AMOR_SOURCE_DIR) + "/tests/h5_reader_check.py";
    ::execl(AMOR_PYTHON, AMOR_PYTHON, script.c_str(), "hold", file.c_str(), held.c_str(), release.c_str(), "20",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_TRUE(wait_for_file(held, 20));
  {
    RunFile f = RunFile::open(file, 30, A.config_hash);
    std::vector<int64_t> want_steps;
    for (int64_t s = 1; s <= 30; ++s) want_steps.push_back(s);
    EXPECT_EQ(f.train_steps(), want_steps);
    for (int64_t s = 31; s <= 33; ++s) f.append_train(formula_row(s, 3));
    f.write_eval("mqar", 33, {{"accuracy", 0.625}, {"loss", 1.25}}, {{"correct", {0, 1}}});
    f.finish("2025-06-01T14:00:00Z");
  }
  write_text(release, "");
  EXPECT_EQ(reap(holder, 20), 0);
  TrainLog log{3, {}};
  for (int64_t s = 1; s <= 33; ++s) log.rows.push_back(formula_row(s, 3));
  Value want(Object{
      {"attrs", attrs_json(A, 3, "2025-06-01T14:00:00Z")},
      {"amor_blocks", 3},
      {"train", log.json()},
      {"eval",
       Value(Object{
           {"mqar", Value(Object{{"step", 33},
                                 {"metrics", Value(Object{{"accuracy", 0.625}, {"loss", 1.25}})},
                                 {"per_example", Value(Object{{"correct", Array{Value(0.0), Value(1.0)}}})},
                                 {"history", Value(Object{{"step", Array{Value(20), Value(33)}},
                                                          {"accuracy", Array{Value(0.5), Value(0.625)}},
                                                          {"loss", Array{Value(2.0), Value(1.25)}}})}})},
           {"lambada_openai", Value(Object{{"step", -1},
                                           {"metrics", Value(Object{{"acc", nullptr}, {"perplexity", nullptr}})},
                                           {"per_example", Value(Object{{"correct", Array{}}, {"logprob", Array{}}})},
                                           {"history", Value(Object{{"step", Array{}},
                                                                    {"acc", Array{}},
                                                                    {"perplexity", Array{}}})}})}})},
      {"tokens", Value(Object{{"validation", empty_token_set()}, {"niah_4k", empty_token_set()}})}});
  write_text(path("want.json"), want.dump());
  EXPECT_EQ(python("layout " + file + " " + path("want.json")), 0);
}

}  // namespace
}  // namespace amor
