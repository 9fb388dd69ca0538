// ModelEval over real models: loglikelihood = the negated sum of the continuation's per-token
// losses of one full forward; teacher_forced = forward's losses and predictions (batched and
// padded, or one at a time: the same); generate = greedy_generate's text, cut by a stop string;
// /tokens records of the first tokens_per_task sequences; oryx_switch only on Oryx models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "data/synthetic/mqar.h"
#include "data/synthetic/token_roles.h"
#include "data/tokenizer/byte_tokenizer.h"
#include "models/infer/greedy_generate.h"
#include "runner/eval/eval_tasks.h"
#include "runner/eval/longbench_metrics.h"
#include "runner/eval/model_eval.h"
#include "tests/common/tiny_models.h"

namespace amor::eval {
namespace {

// max_length 2048, the batch size and how many sequences a task records.
ModelEvalOptions opts(int64_t batch_size, int64_t tokens_per_task) {
  ModelEvalOptions o;
  o.batch_size = batch_size;
  o.tokens_per_task = tokens_per_task;
  return o;
}

std::unique_ptr<model::LanguageModel> tiny(const std::string& kind) {
  model::ModelConfig c = amor::testing::tiny_model(kind, /*d_model=*/16, /*n_layers=*/2, /*vocab=*/260);
  c.init_std = 0.3;  // spread-out predictions
  auto m = model::build_model(c, DType::F64);
  m->params().initialize(7);
  return m;
}

// The full forward's loss at each position of one sequence (targets: -100 = none).
std::vector<double> forward_losses(model::LanguageModel& m, const std::vector<int32_t>& x,
                                   const std::vector<int32_t>& y) {
  const auto T = static_cast<int64_t>(x.size());
  model::Batch b{Tensor::from_vector<int32_t>({1, T}, x), Tensor::from_vector<int32_t>({1, T}, y), {}, {}};
  auto out = m.forward(b, false);
  std::vector<double> l;
  for (int64_t t = 0; t < T; ++t) l.push_back(out.token_loss.item(t));
  return l;
}

TEST(ModelEval, LoglikelihoodIsTheSumOfTheForwardsLosses) {
  for (const char* kind : {"transformer", "gdn", "amor", "oryx"}) {
    auto m = tiny(kind);
    ByteTokenizer tok;
    ModelEval em(*m, tok, nullptr, opts(2, 2));
    std::vector<LoglikRequest> reqs = {{tok.encode("In the beginning"), tok.encode(" God")},
                                       {tok.encode("And"), tok.encode(" the earth was")},
                                       {tok.encode("x"), tok.encode("y")}};
    em.begin_task("lambada");
    auto got = em.loglikelihood(reqs);
    ASSERT_EQ(got.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      std::vector<int32_t> x = reqs[i].context, y(reqs[i].context.size() - 1, -100);
      x.insert(x.end(), reqs[i].continuation.begin(), reqs[i].continuation.end() - 1);
      y.insert(y.end(), reqs[i].continuation.begin(), reqs[i].continuation.end());
      double want = 0;
      for (double l : forward_losses(*m, x, y)) want -= l;
      EXPECT_NEAR(got[i].logprob, want, 1e-9 * std::max(1.0, std::abs(want))) << kind << " " << i;
      EXPECT_LT(got[i].logprob, 0) << kind;
    }
    // Records: the first two sequences (tokens_per_task), loss only at the continuation.
    TokenSequences r = em.records("lambada");
    ASSERT_EQ(r.lengths.size(), 2u) << kind;
    EXPECT_EQ(r.lengths[0], static_cast<int64_t>(reqs[0].context.size() + reqs[0].continuation.size() - 1));
    EXPECT_TRUE(std::isnan(r.loss[0]));
    EXPECT_FALSE(std::isnan(r.loss[static_cast<size_t>(r.lengths[0]) - 1]));
    for (const auto& c : em.token_columns())
      EXPECT_EQ(r.columns.at(c.name).size(), r.token_ids.size() * static_cast<size_t>(c.rows)) << c.name;
    for (float e : r.entropy) EXPECT_TRUE(e >= 0 && e <= 1);
  }
}

TEST(ModelEval, BatchSizeDoesNotChangeTeacherForcedResults) {
  auto m = tiny("gdn");
  ByteTokenizer tok;
  std::vector<TeacherForcedRequest> reqs;
  for (const char* s : {"abcdefghij", "abc", "the quick brown fox"}) {
    auto x = tok.encode(s);
    std::vector<int32_t> y(x.begin() + 1, x.end());
    y.push_back(-100);
    reqs.push_back({x, y});
  }
  ModelEval one(*m, tok, nullptr, opts(1, 0)), three(*m, tok, nullptr, opts(3, 0));
  auto a = one.teacher_forced(reqs), b = three.teacher_forced(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto want = forward_losses(*m, reqs[i].tokens, reqs[i].targets);
    ASSERT_EQ(b[i].nll.size(), want.size());
    EXPECT_EQ(a[i].argmax, b[i].argmax);
    for (size_t t = 0; t < want.size(); ++t) {
      if (reqs[i].targets[t] < 0) {
        EXPECT_TRUE(std::isnan(b[i].nll[t]));
        continue;
      }
      EXPECT_NEAR(b[i].nll[t], want[t], 1e-9);
      EXPECT_NEAR(a[i].nll[t], want[t], 1e-9);
    }
  }
}

TEST(ModelEval, GenerateIsGreedyGenerateCutByStopStrings) {
  auto m = tiny("transformer");
  ByteTokenizer tok;
  ModelEval em(*m, tok, nullptr, opts(2, 1));
  const auto prompt = tok.encode("Let there be");
  model::GenerateOptions go;
  go.max_new_tokens = 12;
  go.eos = tok.eos_id();
  auto ref = model::greedy_generate(*m, {prompt}, go);
  const std::string full = tok.decode(ref[0].tokens, true);
  em.begin_task("passkey");
  auto got = em.generate({{prompt, 12, {}}});
  EXPECT_EQ(got[0], full);
  ASSERT_GE(full.size(), 3u);
  // A stop string made of the 2nd and 3rd generated characters: generation stops after the token
  // that completes its first occurrence, so the text ends with it (the harness cuts the stop off
  // later). Ignoring the stop would return all of `full`, which goes on past it (asserted first,
  // so that the comparison can tell the two apart).
  const std::string stop = full.substr(1, 2);
  const size_t end = full.find(stop) + stop.size();
  ASSERT_LT(end, full.size()) << "'" << full << "': the stop string must end before the generation does";
  auto cut = em.generate({{prompt, 12, {stop}}});
  EXPECT_EQ(cut[0], full.substr(0, end));
  TokenSequences r = em.records("passkey");
  ASSERT_EQ(r.lengths.size(), 1u);  // tokens_per_task: 1
  EXPECT_EQ(r.lengths[0], static_cast<int64_t>(prompt.size() + ref[0].tokens.size() - 1));
}

// Progress lines for long generation tasks: the last group's line counts every request this
// process ran and names its prompt length and decode steps (a generation of 5 tokens takes 4
// decode steps after the prefill's prediction, fewer if it ends at eos).
TEST(ModelEval, GenerateReportsProgress) {
  auto m = tiny("mamba2");
  ByteTokenizer tok;
  ModelEvalOptions o = opts(2, 1);
  std::vector<std::string> lines;
  o.note = [&](const std::string& l) { lines.push_back(l); };
  ModelEval em(*m, tok, nullptr, o);
  em.begin_task("passkey");
  const auto a = tok.encode("twelve bytes"), b = tok.encode("a longer prompt");
  const auto got = em.generate({{a, 5, {}}, {b, 5, {}}});
  ASSERT_FALSE(lines.empty());
  const std::string& last = lines.back();
  // The two prompts (12 and 15 tokens) decode together.
  EXPECT_NE(last.find("passkey: 2/2 requests generated; last batch: 2 x 12-15-token prompt, prefill "),
            std::string::npos)
      << last;
  const size_t at = last.find(" decode steps ");
  ASSERT_NE(at, std::string::npos) << last;
  const int steps = std::stoi(last.substr(last.rfind(' ', at - 1) + 1));
  model::GenerateOptions go;  // what ModelEval passes for these requests
  go.max_new_tokens = 5;
  go.eos = tok.eos_id();
  go.decodable_ids = tok.vocab_size();
  const auto ref = model::greedy_generate(*m, {b}, go);
  EXPECT_EQ(steps, static_cast<int>(ref[0].tokens.size()) - 1) << last;
  EXPECT_EQ(got[1], tok.decode(ref[0].tokens, true));
}

// Progress lines for scoring: with note_every_s 0 one line per batch this process scored, the last
// counting every sequence; with the default 10 s a quick task says nothing.
TEST(ModelEval, ScoreReportsProgress) {
  auto m = tiny("transformer");
  ByteTokenizer tok;
  std::vector<TeacherForcedRequest> reqs;
  for (const char* text : {"In the beginning", "was the word", "and the word", "was with", "God"}) {
    TeacherForcedRequest q;
    q.tokens = tok.encode(text);
    q.targets = q.tokens;
    reqs.push_back(q);
  }
  for (double every : {0.0, 10.0}) {
    ModelEvalOptions o = opts(2, 1);
    o.note_every_s = every;
    std::vector<std::string> lines;
    o.note = [&](const std::string& l) { lines.push_back(l); };
    ModelEval em(*m, tok, nullptr, o);
    em.begin_task("lambada");
    em.teacher_forced(reqs);
    if (every > 0) {
      EXPECT_TRUE(lines.empty()) << lines.front();
      continue;
    }
    ASSERT_EQ(lines.size(), 3u);  // batches of 2, 2 and 1
    EXPECT_EQ(lines[0].rfind("lambada: 2/5 sequences scored (", 0), 0u) << lines[0];
    EXPECT_EQ(lines[2].rfind("lambada: 5/5 sequences scored (", 0), 0u) << lines[2];
    EXPECT_NE(lines[2].find(" tokens/s)"), std::string::npos) << lines[2];
  }
}

// Stop ids and min_new_tokens reach greedy_generate: a request whose stop id is the model's own
// first free token, with min_new_tokens 1, starts with another token and equals greedy_generate
// with the same options; without min_new_tokens it stops at once.
TEST(ModelEval, GenerateWithStopIdsAndMinNewTokens) {
  auto m = tiny("transformer");
  ByteTokenizer tok;
  ModelEval em(*m, tok, nullptr, opts(2, 1));
  const auto prompt = tok.encode("Let there be");
  model::GenerateOptions go;
  go.max_new_tokens = 10;
  go.eos = tok.eos_id();
  const int32_t first = model::greedy_generate(*m, {prompt}, go)[0].tokens[0];
  go.stop_ids = {first};
  go.min_new_tokens = 1;
  const auto ref = model::greedy_generate(*m, {prompt}, go);
  ASSERT_NE(ref[0].tokens[0], first);
  em.begin_task("passkey");
  GenRequest q{prompt, 10, {}, {first}, 1};
  EXPECT_EQ(em.generate({q})[0], tok.decode(ref[0].tokens, true));
  q.min_new_tokens = 0;
  EXPECT_EQ(em.generate({q})[0], tok.decode(std::vector<int32_t>{first}, true));
}

// An EvalModel that passes everything to another and keeps the generation requests and outputs.
class RecordingEval final : public EvalModel {
 public:
  explicit RecordingEval(EvalModel& inner) : inner_(inner) {}
  std::vector<LoglikResult> loglikelihood(const std::vector<LoglikRequest>& r) override { return inner_.loglikelihood(r); }
  std::vector<TeacherForcedResult> teacher_forced(const std::vector<TeacherForcedRequest>& r) override {
    return inner_.teacher_forced(r);
  }
  std::vector<std::string> generate(const std::vector<GenRequest>& r) override {
    requests = r;
    outputs = inner_.generate(r);
    return outputs;
  }
  int64_t max_length() const override { return inner_.max_length(); }
  const Tokenizer& tokenizer() const override { return inner_.tokenizer(); }
  void begin_task(const std::string& name) override { inner_.begin_task(name); }
  std::vector<GenRequest> requests;
  std::vector<std::string> outputs;

 private:
  EvalModel& inner_;
};

// longbench_samsum over a real model: each output is greedy_generate's with eos and the newline
// id as end ids and min_new_tokens 1 (never "\n" or EOS first, ends at the newline token), and the
// score is ROUGE-L of its first line after leading newlines (longbench_metrics.h).
TEST(ModelEval, LongBenchSamsumDecodesAsPredPy) {
  auto m = tiny("transformer");
  ByteTokenizer tok;
  ModelEval em(*m, tok, nullptr, opts(2, 0));
  RecordingEval rec(em);
  const TaskResult r = run_task(
      {.name = "longbench_samsum", .path = std::string(AMOR_SOURCE_DIR) + "/tests/fixtures/eval/samsum.jsonl"},
      rec);
  ASSERT_EQ(rec.requests.size(), 2u);
  const std::vector<std::string> answers = {"Tom is coming tonight at 8.", "Bob can't have lunch with Eve."};
  for (size_t i = 0; i < 2; ++i) {
    model::GenerateOptions go;
    go.max_new_tokens = 128;
    go.eos = tok.eos_id();
    go.stop_ids = {'\n'};
    go.min_new_tokens = 1;
    const auto g = model::greedy_generate(*m, {rec.requests[i].context}, go)[0];
    ASSERT_FALSE(g.tokens.empty());
    EXPECT_NE(g.tokens[0], '\n');
    EXPECT_NE(g.tokens[0], tok.eos_id());
    const std::string text = tok.decode(g.tokens, true);
    EXPECT_EQ(rec.outputs[i], text);
    if (g.stop_reason == "stop_id") {
      EXPECT_EQ(text.back(), '\n');
    }
    EXPECT_EQ(text.find('\n'), g.stop_reason == "stop_id" ? text.size() - 1 : std::string::npos);
    EXPECT_EQ(r.per_example.at("score")[i], rouge_l_score(first_line(text), answers[i])) << i;
  }
}

// Token roles travel with the records: a request's roles (none where it has none), the generated
// tokens read back as `answer`; the mqar and passkey tasks label their tokens from the generators.
TEST(ModelEval, RecordsCarryTokenRoles) {
  using synthetic::TokenRole;
  const auto code = [](TokenRole r) { return static_cast<uint8_t>(r); };
  auto m = tiny("amor");
  ByteTokenizer tok;
  {
    ModelEval em(*m, tok, nullptr, opts(2, 2));
    em.begin_task("t");
    const auto x = tok.encode("abcd");
    const std::vector<int32_t> y{-100, -100, -100, 5};
    TeacherForcedRequest with{x, y}, without{x, y};
    with.roles = {2, 3, 5, 4};
    em.teacher_forced({with, without});
    TokenSequences r = em.records("t");
    EXPECT_EQ(r.role, (std::vector<uint8_t>{2, 3, 5, 4, 0, 0, 0, 0}));
    TeacherForcedRequest bad{x, y};
    bad.roles = {1, 2};
    EXPECT_THROW(em.teacher_forced({bad}), Error);
  }
  {
    ModelEval em(*m, tok, nullptr, opts(2, 2));
    em.begin_task("g");
    const auto prompt = tok.encode("Let");
    GenRequest a{prompt, 5, {}}, b{prompt, 5, {}};  // roles by name: members may be added before them
    a.roles = {code(TokenRole::Other), code(TokenRole::Needle), code(TokenRole::Question)};
    em.generate({a, b});
    TokenSequences r = em.records("g");
    ASSERT_EQ(r.lengths.size(), 2u);
    ASSERT_EQ(r.role.size(), r.token_ids.size());
    const auto L0 = static_cast<size_t>(r.lengths[0]);
    ASSERT_GT(L0, prompt.size());
    EXPECT_EQ(std::vector<uint8_t>(r.role.begin(), r.role.begin() + 3),
              (std::vector<uint8_t>{code(TokenRole::Other), code(TokenRole::Needle), code(TokenRole::Question)}));
    for (size_t t = 3; t < L0; ++t) EXPECT_EQ(r.role[t], code(TokenRole::Answer));
    for (size_t t = L0; t < r.role.size(); ++t) EXPECT_EQ(r.role[t], 0);
  }
  {  // mqar: the generator's roles, key / value / query / filler, position by position.
    ModelEval em(*m, tok, nullptr, opts(4, 3));
    TaskSpec spec;
    spec.name = "mqar";
    spec.mqar_vocab_size = 128;
    spec.mqar_seq_len = 32;
    spec.mqar_kv_pairs = 4;
    spec.mqar_examples = 5;
    run_task(spec, em);
    synthetic::MqarConfig c;
    c.vocab_size = 128;
    c.input_seq_len = 32;
    c.num_kv_pairs = 4;
    c.num_examples = 3;
    c.seed = spec.seed + 10;
    const auto task = synthetic::mqar(c);
    TokenSequences r = em.records("mqar");
    ASSERT_EQ(r.role.size(), 96u);
    EXPECT_EQ(r.role, std::vector<uint8_t>(task.roles.data<uint8_t>(), task.roles.data<uint8_t>() + 96));
    EXPECT_EQ(std::count(r.role.begin(), r.role.end(), code(TokenRole::Query)), 12);
  }
  {  // passkey with byte tokens: the needle's bytes are the pass key sentence.
    ModelEval em(*m, tok, nullptr, opts(2, 1));
    TaskSpec spec;
    spec.name = "passkey";
    spec.lengths = {400};
    spec.depths = {50};
    run_task(spec, em);
    TokenSequences r = em.records("passkey");
    ASSERT_EQ(r.role.size(), r.token_ids.size());
    std::string needle, question;
    for (size_t t = 0; t < r.role.size(); ++t) {
      if (r.role[t] == code(TokenRole::Needle)) needle += static_cast<char>(r.token_ids[t]);
      if (r.role[t] == code(TokenRole::Question)) question += static_cast<char>(r.token_ids[t]);
    }
    EXPECT_EQ(needle.substr(0, 16), "The pass key is ");
    EXPECT_EQ(needle.substr(needle.size() - 17), " is the pass key.");
    EXPECT_EQ(question, "\nWhat is the pass key? The pass key is");
    EXPECT_EQ(r.role.front(), code(TokenRole::Other));
    // Whatever was generated and read back is a suffix of answers.
    const auto first = std::find(r.role.begin(), r.role.end(), code(TokenRole::Answer));
    EXPECT_TRUE(std::all_of(first, r.role.end(), [&](uint8_t c) { return c == code(TokenRole::Answer); }));
  }
}

TEST(ModelEval, OryxSwitchRunsOnOryxAndIsRefusedElsewhere) {
  ByteTokenizer tok;
  TaskSpec s;
  s.name = "oryx_switch";
  s.seq_len = 24;
  s.switch_at = 12;
  s.window = 4;
  s.num_sequences = 2;
  auto oryx = tiny("oryx");
  ModelEval eo(*oryx, tok, nullptr, {});
  TaskResult r = run_task(s, eo);
  EXPECT_EQ(r.per_example.at("offset"), (std::vector<double>{-4, -3, -2, -1, 0, 1, 2, 3}));
  EXPECT_GT(r.metrics.at("ppl_before"), 1);
  EXPECT_GT(r.metrics.at("ppl_after"), 1);
  // All-attention (before = after = 1) differs from the switch: the modes reach the model.
  TaskSpec same = s;
  same.before = 1;
  TaskResult r2 = run_task(same, eo);
  EXPECT_NE(r2.metrics.at("ppl_before"), r.metrics.at("ppl_before"));
  auto gdn = tiny("gdn");
  ModelEval eg(*gdn, tok, nullptr, {});
  try {
    run_task(s, eg);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("oryx_switch: model.kind gdn has no mixer modes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace amor::eval
