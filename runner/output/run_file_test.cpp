// run.h5: written here, read back by h5py (tests/h5_reader_check.py) for the layout of design §6;
// reopened for a resume (truncation); every bad input's message. (Live SWMR reading and a killed
// writer: run_file_swmr_test.cpp.)
#include "runner/output/run_file_test_util.h"

namespace amor {
namespace {

TEST_F(RunFileTest, WritesTheDesignLayoutThatH5pyReads) {
  const std::string file = path("run.h5");
  RunLayout L = amor_layout();
  RunAttrs A = attrs_for("amor-gdn-180m");
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  TrainLog log{3, {}};
  for (int64_t s : {1, 2, 5, 10, 20}) {
    TrainRow r;
    r.step = s;
    r.tokens = s * 8192;
    r.loss = 11.0 * u(rng);
    r.lr = 3e-4 * u(rng);
    r.grad_norm = u(rng);
    r.tokens_per_s = 1e5 * u(rng);
    r.columns["fire_rate"] = {u(rng)};
    if (s != 10) r.columns["tau"] = {s == 2 ? kNaN : u(rng)};  // step 10 leaves tau out: NaN
    if (s != 5)  // step 5 leaves the per-block values out: NaN
      for (int k = 0; k < 3; ++k) {
        r.columns["block_fire_rate"].push_back(u(rng));
        r.columns["block_tau"].push_back(u(rng));
      }
    log.rows.push_back(r);
  }
  TokenSequences a = random_sequences(rng, {5, 3}, 3, true), b = random_sequences(rng, {4}, 3, true);
  std::vector<double> correct1 = {1, 0, 1}, correct2 = {1, 1, 0, 1};
  std::vector<double> lam_correct = {0, 1}, lam_logprob = {-3.5, -0.25};
  const std::string finished = "2025-06-01T13:00:00Z";
  {
    RunFile f = RunFile::create(file, A, L);
    EXPECT_EQ(f.token_column_rows("gate"), 3);
    EXPECT_EQ(f.token_column_rows("mode"), 1);
    EXPECT_EQ(f.token_column_rows("none"), -1);
    for (const auto& r : log.rows) f.append_train(r);
    f.write_eval("mqar", 10, {{"accuracy", 0.5}, {"loss", 2.5}}, {{"correct", correct1}});
    f.write_eval("mqar", 20, {{"accuracy", 0.75}, {"loss", 1.5}}, {{"correct", correct2}});
    f.write_eval("lambada_openai", 20, {{"acc", 0.5}}, {{"correct", lam_correct}, {"logprob", lam_logprob}});
    f.write_tokens("validation", 20, a);
    f.write_tokens("validation", 20, b);
    f.flush();
    EXPECT_EQ(f.train_rows(), 5);
    EXPECT_EQ(f.train_steps(), (std::vector<int64_t>{1, 2, 5, 10, 20}));
    f.finish(finished);
    f.close();
  }
  EXPECT_FALSE(fs::exists(path(".run.h5.tmp." + std::to_string(::getpid()))));  // renamed into place

  Value want(Object{
      {"attrs", attrs_json(A, 3, finished)},
      {"amor_blocks", 3},
      {"train", log.json()},
      {"eval",
       Value(Object{
           {"mqar", Value(Object{{"step", 20},
                                 {"metrics", Value(Object{{"accuracy", 0.75}, {"loss", 1.5}})},
                                 {"per_example", Value(Object{{"correct", nums(correct2)}})},
                                 {"history", Value(Object{{"step", Array{Value(10), Value(20)}},
                                                          {"accuracy", Array{Value(0.5), Value(0.75)}},
                                                          {"loss", Array{Value(2.5), Value(1.5)}}})}})},
           {"lambada_openai",
            Value(Object{{"step", 20},
                         {"metrics", Value(Object{{"acc", 0.5}, {"perplexity", nullptr}})},
                         {"per_example", Value(Object{{"correct", nums(lam_correct)}, {"logprob", nums(lam_logprob)}})},
                         {"history", Value(Object{{"step", Array{Value(20)}},
                                                  {"acc", Array{Value(0.5)}},
                                                  {"perplexity", Array{Value(nullptr)}}})}})}})},
      {"tokens", Value(Object{{"validation", token_json(20, concat(a, b, 3), 12)}, {"niah_4k", empty_token_set()}})}});
  write_text(path("want.json"), want.dump());
  EXPECT_EQ(python("layout " + file + " " + path("want.json")), 0);
}

// K = 0 (no AMOR blocks): gate is [0, total], per-block columns [n, 0]; mode defaults to 0; a token
// set written at a new step holds only that step's sequences.
TEST_F(RunFileTest, ModelsWithoutGatesAndTokenSetsReplacedByALaterStep) {
  const std::string file = path("run.h5");
  RunLayout L;
  L.token_sets = {"validation"};
  L.token_columns = gate_token_columns(0);
  L.train_columns = gate_columns(0);
  RunAttrs A = attrs_for("mamba2-130m");
  std::mt19937 rng(11);
  TokenSequences early = random_sequences(rng, {6}, 0, false), late = random_sequences(rng, {2, 0, 3}, 0, false);
  TrainLog log{0, {formula_row(1, 0), formula_row(2, 0)}};
  {
    RunFile f = RunFile::create(file, A, L);
    for (const auto& r : log.rows) f.append_train(r);
    f.write_tokens("validation", 1, early);
    f.write_tokens("validation", 2, late);
    f.close();
  }
  Value want(Object{{"attrs", attrs_json(A, 0, "")},
                    {"amor_blocks", 0},
                    {"train", log.json()},
                    {"eval", Value(Object{})},
                    {"tokens", Value(Object{{"validation", token_json(2, late, 5)}})}});
  write_text(path("want.json"), want.dump());
  EXPECT_EQ(python("layout " + file + " " + path("want.json")), 0);
}

// A model kind's own metric columns (any names, scalar or [n, width]) are created in the declared
// order, filled by name (NaN where a row leaves one out), found again on reopening for a resume
// and truncated with the rest: nothing in the writer knows the names.
TEST_F(RunFileTest, AModelsOwnColumnsAreWrittenByName) {
  const std::string file = path("run.h5");
  RunLayout L;
  L.train_columns = {{"router_entropy", {}}, {"expert_load", {2}}};
  auto row = [](int64_t s, bool with_load) {
    TrainRow r;
    r.step = s;
    r.columns["router_entropy"] = {0.5 * static_cast<double>(s)};
    if (with_load) r.columns["expert_load"] = {0.25, static_cast<double>(s)};
    return r;
  };
  {
    RunFile f = RunFile::create(file, attrs_for("moe"), L);
    for (int64_t s : {1, 2, 3}) f.append_train(row(s, s != 2));
    f.close();
  }
  {
    RunFile f = RunFile::open(file, 2);  // drops step 3
    EXPECT_EQ(f.train_rows(), 2);
    f.append_train(row(3, true));
    f.append_train(row(4, true));
    f.close();
  }
  h5::silence_errors();
  h5::Handle h(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  ASSERT_TRUE(h.valid());
  h5::Handle ent = h5::open_dataset(h.get(), "train/router_entropy");
  EXPECT_EQ(h5::read_1d<double>(ent.get()), (std::vector<double>{0.5, 1.0, 1.5, 2.0}));
  h5::Handle load = h5::open_dataset(h.get(), "train/expert_load");
  ASSERT_EQ(h5::extent(load.get()), (std::vector<hsize_t>{4, 2}));
  std::vector<double> v(8);
  ASSERT_GE(H5Dread(load.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  EXPECT_EQ(v[0], 0.25);
  EXPECT_EQ(v[1], 1.0);
  EXPECT_TRUE(std::isnan(v[2]) && std::isnan(v[3]));  // step 2 left it out
  EXPECT_EQ(v[5], 3.0);
  EXPECT_EQ(v[7], 4.0);
}

// A model kind's own token columns ([total] or [rows, total] with a root attribute holding rows)
// are created, written and emptied by name; a column the layout lacks is refused.
TEST_F(RunFileTest, AModelsOwnTokenColumnsAreWrittenByName) {
  const std::string file = path("run.h5");
  RunLayout L;
  L.token_sets = {"validation"};
  L.token_columns = {{"router", "", 1}, {"experts", "moe_experts", 2}};
  TokenSequences s;
  s.lengths = {3};
  s.token_ids = {1, 2, 3};
  s.entropy = {0.5f, 0.5f, 0.5f};
  s.loss = {1.f, 1.f, 1.f};
  s.columns["experts"] = {1, 0, 1, 0, 1, 0};  // [2, 3]
  {
    RunFile f = RunFile::create(file, attrs_for("moe"), L);
    EXPECT_EQ(f.token_column_rows("experts"), 2);
    f.write_tokens("validation", 1, s);  // router left out: zeros
    TokenSequences bad = s;
    bad.columns["gate"] = {1, 1, 1};
    EXPECT_ERROR(f.write_tokens("validation", 1, bad), "token set 'validation' has no token column 'gate'");
    f.close();
  }
  h5::silence_errors();
  h5::Handle h(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  ASSERT_TRUE(h.valid());
  EXPECT_EQ(h5::read_int_attr(h.get(), "moe_experts"), 2);
  EXPECT_EQ(H5Aexists(h.get(), "amor_blocks"), 0);
  h5::Handle router = h5::open_dataset(h.get(), "tokens/validation/router");
  EXPECT_EQ(h5::extent(router.get()), (std::vector<hsize_t>{3}));
  h5::Handle experts = h5::open_dataset(h.get(), "tokens/validation/experts");
  ASSERT_EQ(h5::extent(experts.get()), (std::vector<hsize_t>{2, 3}));
  std::vector<uint8_t> v(6), r(3, 9);
  ASSERT_GE(H5Dread(experts.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  EXPECT_EQ(v, s.columns["experts"]);
  ASSERT_GE(H5Dread(router.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, r.data()), 0);
  EXPECT_EQ(r, (std::vector<uint8_t>{0, 0, 0}));
}

// A clean close, then resuming from step 3: later training rows, evaluations and token sets go;
// the run appends again from step 4 with no duplicated rows.
// Token roles: every token set gets `role` uint8 [total] with the code names as its `names`
// attribute (what h5py users decode with); roles left out are 0; a resume truncates them with
// the rest; a file made without roles (an older layout) takes sequences with roles and drops them.
TEST_F(RunFileTest, TokenRolesAreWrittenWithTheirNames) {
  const std::string file = path("run.h5");
  RunLayout L;
  L.token_sets = {"mqar", "lambada"};
  L.token_columns = gate_token_columns(1);
  L.role_names = {"none", "other", "key", "value", "query"};
  auto seqs = [](std::vector<uint8_t> role) {
    TokenSequences s;
    s.lengths = {3};
    s.token_ids = {1, 2, 3};
    s.entropy = {0.5f, 0.5f, 0.5f};
    s.loss = {1.f, 1.f, 1.f};
    s.columns["gate"] = {0, 1, 0};
    s.role = std::move(role);
    return s;
  };
  {
    RunFile f = RunFile::create(file, attrs_for("roles"), L);
    f.write_tokens("mqar", 1, seqs({2, 3, 4}));
    f.write_tokens("mqar", 1, seqs({4, 4, 1}));
    f.write_tokens("lambada", 1, seqs({}));  // no roles: none
    EXPECT_ERROR(f.write_tokens("mqar", 1, seqs({1, 2})), "role has 2 values, expected 3");
    f.close();
  }
  auto read = [&](const std::string& set) {
    h5::silence_errors();
    h5::Handle h(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    h5::Handle g = h5::open_group(h.get(), "tokens/" + set);
    h5::Handle ds = h5::open_dataset(g.get(), "role");
    return std::make_pair(h5::read_1d<uint8_t>(ds.get()), h5::read_string_array_attr(ds.get(), "names"));
  };
  EXPECT_EQ(read("mqar").first, (std::vector<uint8_t>{2, 3, 4, 4, 4, 1}));
  EXPECT_EQ(read("mqar").second, L.role_names);
  EXPECT_EQ(read("lambada").first, (std::vector<uint8_t>{0, 0, 0}));
  {  // Resume before the tokens' step: the roles are emptied with the other arrays.
    RunFile f = RunFile::open(file, 0);
    f.close();
  }
  EXPECT_TRUE(read("mqar").first.empty());
  EXPECT_EQ(read("mqar").second, L.role_names);
  // h5py reads the names as str and decodes the codes with them.
  {
    RunFile f = RunFile::open(file, 0);
    f.write_tokens("mqar", 2, seqs({2, 3, 4}));
    f.close();
  }
  write_text(path("check.py"),
             "import sys, h5py\n"
             "with h5py.File(sys.argv[1], 'r') as f:\n"
             "    ds = f['tokens/mqar/role']\n"
             "    names = list(ds.attrs['names'])\n"
             "    got = [names[c] for c in ds[()]]\n"
             "    assert ds.dtype == 'uint8', ds.dtype\n"
             "    assert got == ['key', 'value', 'query'], got\n");
  EXPECT_EQ(std::system(fmt::format("{} {} {}", AMOR_PYTHON, path("check.py"), file).c_str()), 0);

  // A layout without role names (files made before roles): no role dataset; roles are dropped.
  const std::string old = path("old.h5");
  L.role_names.clear();
  {
    RunFile f = RunFile::create(old, attrs_for("old"), L);
    f.write_tokens("mqar", 1, seqs({2, 3, 4}));
    f.close();
  }
  h5::Handle h(H5Fopen(old.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  h5::Handle g = h5::open_group(h.get(), "tokens/mqar");
  EXPECT_EQ(H5Lexists(g.get(), "role", H5P_DEFAULT), 0);
  // A model's token column cannot take the runner's name.
  RunLayout bad = L;
  bad.token_columns.push_back({"role", "", 1});
  EXPECT_ERROR(RunFile::create(path("bad.h5"), attrs_for("bad"), bad), "token column 'role' is one of the runner's own");
}

TEST_F(RunFileTest, ReopenForResumeTruncatesToTheCheckpointStep) {
  const std::string file = path("run.h5");
  RunLayout L = amor_layout();
  RunAttrs A = attrs_for("amor-gdn-180m");
  std::mt19937 rng(3);
  TokenSequences toks = random_sequences(rng, {4}, 3, false);
  {
    RunFile f = RunFile::create(file, A, L);
    for (int64_t s = 1; s <= 6; ++s) f.append_train(formula_row(s, 3));
    f.write_eval("mqar", 2, {{"accuracy", 0.25}, {"loss", 3.0}}, {{"correct", {0, 1}}});
    f.write_eval("mqar", 4, {{"accuracy", 0.5}, {"loss", 2.0}}, {{"correct", {1, 1}}});
    f.write_eval("lambada_openai", 2, {{"acc", 0.125}, {"perplexity", 90.0}}, {{"correct", {1}}});
    f.write_tokens("validation", 2, toks);
    f.write_tokens("niah_4k", 5, toks);
    f.finish("2025-06-01T13:00:00Z");
  }
  TrainLog log{3, {}};
  {
    RunFile f = RunFile::open(file, 3, A.config_hash);
    EXPECT_EQ(f.train_steps(), (std::vector<int64_t>{1, 2, 3}));
    for (int64_t s = 4; s <= 5; ++s) f.append_train(formula_row(s, 3));
    EXPECT_EQ(f.train_rows(), 5);
    f.close();
  }
  for (int64_t s = 1; s <= 5; ++s) log.rows.push_back(formula_row(s, 3));
  Value want(Object{
      {"attrs", attrs_json(A, 3, "")},
      {"amor_blocks", 3},
      {"train", log.json()},
      {"eval",
       Value(Object{
           // Step 4's evaluation is undone: its metrics are step 2's again, its per-example scores gone.
           {"mqar", Value(Object{{"step", 2},
                                 {"metrics", Value(Object{{"accuracy", 0.25}, {"loss", 3.0}})},
                                 {"per_example", Value(Object{{"correct", Array{}}})},
                                 {"history", Value(Object{{"step", Array{Value(2)}},
                                                          {"accuracy", Array{Value(0.25)}},
                                                          {"loss", Array{Value(3.0)}}})}})},
           {"lambada_openai", Value(Object{{"step", 2},
                                           {"metrics", Value(Object{{"acc", 0.125}, {"perplexity", 90.0}})},
                                           {"per_example", Value(Object{{"correct", Array{Value(1.0)}}, {"logprob", Array{}}})},
                                           {"history", Value(Object{{"step", Array{Value(2)}},
                                                                    {"acc", Array{Value(0.125)}},
                                                                    {"perplexity", Array{Value(90.0)}}})}})}})},
      {"tokens", Value(Object{{"validation", token_json(2, toks, 4)}, {"niah_4k", empty_token_set()}})}});
  write_text(path("want.json"), want.dump());
  EXPECT_EQ(python("layout " + file + " " + path("want.json")), 0);
}

TEST_F(RunFileTest, CreateErrorsNameThePath) {
  RunAttrs A = attrs_for("x");
  std::string missing = path("no/such/dir/run.h5");
  EXPECT_ERROR(RunFile::create(missing, A, {}), missing.c_str(), "cannot create the run file",
               "No such file or directory");
  write_text(path("plain"), "not a folder");
  std::string under_file = path("plain/run.h5");
  EXPECT_ERROR(RunFile::create(under_file, A, {}), under_file.c_str(), "Not a directory");

  const std::string f = path("run.h5");
  RunLayout bad;
  bad.token_columns = gate_token_columns(-1);
  EXPECT_ERROR(RunFile::create(f, A, bad), f.c_str(), "amor_blocks must be in [0, 4096], got -1");
  bad = {};
  bad.train_columns = {{"loss", {}}};
  EXPECT_ERROR(RunFile::create(f, A, bad), "train column 'loss' is one of the runner's own");
  bad.train_columns = {{"m", {2, 3}}};
  EXPECT_ERROR(RunFile::create(f, A, bad), "train column 'm' has shape [2, 3]; expected [] or [width]");
  bad.train_columns = {{"m", {}}, {"m", {1}}};
  EXPECT_ERROR(RunFile::create(f, A, bad), "train column 'm' is listed twice");
  bad = {};
  bad.eval_tasks = {{"mqar", {"acc"}, {}}, {"mqar", {"acc"}, {}}};
  EXPECT_ERROR(RunFile::create(f, A, bad), "eval task 'mqar' is listed twice");
  bad.eval_tasks = {{"mqar", {"acc", "step"}, {}}};
  EXPECT_ERROR(RunFile::create(f, A, bad), "eval task 'mqar' metric name 'step' is reserved");
  bad.eval_tasks = {{"mqar", {"acc"}, {"history"}}};
  EXPECT_ERROR(RunFile::create(f, A, bad), "per-example dataset name 'history' is reserved");
  bad.eval_tasks = {{"arc/easy", {"acc"}, {}}};
  EXPECT_ERROR(RunFile::create(f, A, bad), "eval task name 'arc/easy' cannot be an HDF5 name");
  bad.eval_tasks = {};
  bad.token_sets = {""};
  EXPECT_ERROR(RunFile::create(f, A, bad), "token set name '' cannot be an HDF5 name");
  EXPECT_FALSE(fs::exists(f));  // nothing was created by a bad layout
}

TEST_F(RunFileTest, OpenErrorsNameThePath) {
  const std::string f = path("run.h5");
  EXPECT_ERROR(RunFile::open(f, 0), f.c_str(), "no run file to resume");
  write_text(f, "this is not HDF5");
  EXPECT_ERROR(RunFile::open(f, 0), f.c_str(), "cannot open the run file for writing");
  fs::remove(f);
  RunAttrs A = attrs_for("x");
  RunFile::create(f, A, {}).close();
  EXPECT_ERROR(RunFile::open(f, 0, "feedbeef"), f.c_str(), "belongs to config 3f2a9c0d", "not feedbeef",
               "config changed");
  // A plain HDF5 file that amor-run did not write.
  const std::string other = path("other.h5");
  h5::silence_errors();
  H5Fclose(H5Fcreate(other.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  EXPECT_ERROR(RunFile::open(other, 0), other.c_str(), "not an amor-run run file");
}

TEST_F(RunFileTest, WriteErrorsNameTheFileAndField) {
  const std::string p = path("run.h5");
  RunFile f = RunFile::create(p, attrs_for("x"), amor_layout());
  f.append_train(formula_row(5, 3));
  EXPECT_ERROR(f.append_train(formula_row(5, 3)), p.c_str(), "training step 5 logged after step 5");
  TrainRow r = formula_row(6, 3);
  r.columns["block_tau"] = {1.0};
  EXPECT_ERROR(f.append_train(r), "step 6: 1 values for train column 'block_tau' of width 3");
  r = formula_row(6, 3);
  r.columns["fire_rat"] = {1.0};
  EXPECT_ERROR(f.append_train(r), "step 6: train column 'fire_rat' was not declared when the file was created");
  EXPECT_EQ(f.train_rows(), 1);  // a refused row writes nothing

  EXPECT_ERROR(f.write_eval("hellaswag", 1, {}), p.c_str(),
               "eval task 'hellaswag' was not declared when the file was created (declared: lambada_openai, mqar)");
  EXPECT_ERROR(f.write_eval("mqar", 1, {{"acc_norm", 1.0}}), "eval task 'mqar' has no metric 'acc_norm' (declared: accuracy, loss)");
  EXPECT_ERROR(f.write_eval("mqar", 1, {}, {{"scores", {1.0}}}), "eval task 'mqar' has no per-example dataset 'scores'");
  f.write_eval("mqar", 10, {});
  EXPECT_ERROR(f.write_eval("mqar", 9, {}), "eval task 'mqar': step 9 written after step 10");

  std::mt19937 rng(1);
  TokenSequences s = random_sequences(rng, {3, 2}, 3, true);
  EXPECT_ERROR(f.write_tokens("train", 1, s), "token set 'train' was not declared");
  TokenSequences bad = s;
  bad.entropy.pop_back();
  EXPECT_ERROR(f.write_tokens("validation", 1, bad), p.c_str(),
               "token set 'validation': entropy has 4 values, expected 5 (sequence lengths sum to 5, gate has 3 rows)");
  bad = s;
  bad.columns["gate"].resize(10);
  EXPECT_ERROR(f.write_tokens("validation", 1, bad), "gate has 10 values, expected 15");
  bad = s;
  bad.lengths = {6, -1};
  EXPECT_ERROR(f.write_tokens("validation", 1, bad), "negative sequence length -1");

  f.close();
  EXPECT_ERROR(f.flush(), p.c_str(), "the run file is closed");
}

TEST(UtcTimestamp, IsIso8601Utc) {
  std::string t = utc_timestamp();
  ASSERT_EQ(t.size(), 20u);
  EXPECT_EQ(t[4], '-');
  EXPECT_EQ(t[10], 'T');
  EXPECT_EQ(t.back(), 'Z');
}

}  // namespace
}  // namespace amor
