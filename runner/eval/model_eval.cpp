// EvalModel over a real model (see model_eval.h).
#include "runner/eval/model_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "data/synthetic/token_roles.h"
#include "data/synthetic/token_task.h"
#include "kernels/core/error.h"
#include "models/infer/greedy_generate.h"
#include "models/lm/model_kinds.h"

namespace amor::eval {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor host(const Tensor& t) { return t.defined() && !t.is_cpu() ? t.to(Device::CPU) : t; }

Device model_device(model::LanguageModel& m) {
  for (const auto& p : m.params().params())
    if (p->value.defined()) return p->value.device();
  throw Error("model_eval: the model holds no weights (a sharded model? evaluate a full replica)");
}

}  // namespace

ModelEval::ModelEval(model::LanguageModel& model, const Tokenizer& tokenizer,
                     dist::Communicator* comm, ModelEvalOptions options)
    : model_(model), tok_(tokenizer), comm_(comm), opt_(options) {
  AMOR_CHECK(opt_.batch_size >= 1, "model_eval: batch_size must be at least 1, got {}", opt_.batch_size);
  AMOR_CHECK(tok_.vocab_size() <= model.config().vocab,
             "model_eval: tokenizer '{}' has {} ids but the model's vocabulary (model.vocab) is {}",
             tok_.name(), tok_.vocab_size(), model.config().vocab);
  columns_ = model.token_columns();
  rows_ = model::token_row_count(columns_);
  modes_ = model.takes_modes();
}

void ModelEval::begin_task(const std::string& name) {
  task_ = name;
  Recorded& r = records_[name];
  r = Recorded{};
  r.rows.assign(static_cast<size_t>(rows_), {});
}

int64_t ModelEval::to_record(int64_t n) const {
  auto it = records_.find(task_);
  if (it == records_.end()) return 0;
  const auto have = static_cast<int64_t>(it->second.seqs.lengths.size());
  return std::clamp<int64_t>(opt_.tokens_per_task - have, 0, n);
}

bool ModelEval::mine(int64_t batch_index) const {
  return !comm_ || batch_index % comm_->size() == comm_->rank();
}

void ModelEval::exchange(std::vector<double>& values) {
  if (comm_ && comm_->size() > 1 && !values.empty())
    comm_->all_reduce(values.data(), static_cast<int64_t>(values.size()), dist::ReduceOp::Sum);
}

TokenSequences ModelEval::records(const std::string& task) const {
  auto it = records_.find(task);
  if (it == records_.end()) return {};
  TokenSequences s = it->second.seqs;
  set_token_rows(s, columns_, it->second.rows);
  return s;
}

// Every request's nll and argmax, plus the records of the first ones. Values travel as doubles,
// per request: nll[T], argmax[T], and for a recorded request also entropy[T] and the model's
// token rows[R][T].
std::vector<TeacherForcedResult> ModelEval::score(const std::vector<TeacherForcedRequest>& requests,
                                                  const std::vector<std::vector<uint8_t>>* modes) {
  const auto n = static_cast<int64_t>(requests.size());
  const int64_t recorded = to_record(n);
  const int64_t R = rows_;
  auto len = [&](int64_t i) { return static_cast<int64_t>(requests[static_cast<size_t>(i)].tokens.size()); };
  std::vector<int64_t> offset(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    const auto& q = requests[static_cast<size_t>(i)];
    AMOR_CHECK(len(i) > 0 && q.targets.size() == q.tokens.size(),
               "model_eval: request {} has {} tokens and {} targets (need equal, non-zero)", i,
               q.tokens.size(), q.targets.size());
    AMOR_CHECK(q.roles.empty() || q.roles.size() == q.tokens.size(),
               "model_eval: request {} has {} tokens but {} roles", i, q.tokens.size(), q.roles.size());
    if (modes)
      AMOR_CHECK((*modes)[static_cast<size_t>(i)].size() == q.tokens.size(),
                 "model_eval: request {} has {} tokens but {} modes", i, q.tokens.size(),
                 (*modes)[static_cast<size_t>(i)].size());
    offset[static_cast<size_t>(i) + 1] = offset[static_cast<size_t>(i)] + len(i) * (i < recorded ? 3 + R : 2);
  }
  std::vector<double> buf(static_cast<size_t>(offset.back()), 0.0);
  const Device dev = model_device(model_);
  // Progress (opt_.note): sequences and tokens this rank has scored, of those it was dealt.
  int64_t my_total = 0, my_done = 0, my_tokens = 0;
  for (int64_t b0 = 0, j = 0; b0 < n; b0 += opt_.batch_size, ++j)
    if (mine(j)) my_total += std::min(opt_.batch_size, n - b0);
  const auto start = std::chrono::steady_clock::now();
  auto last_note = start;
  bool noted = false;

  for (int64_t b0 = 0, j = 0; b0 < n; b0 += opt_.batch_size, ++j) {
    if (!mine(j)) continue;
    const int64_t B = std::min(opt_.batch_size, n - b0);
    int64_t T = 0;
    for (int64_t i = b0; i < b0 + B; ++i) T = std::max(T, len(i));
    std::vector<int32_t> tokens(static_cast<size_t>(B * T), 0);
    std::vector<int32_t> targets(static_cast<size_t>(B * T), synthetic::kIgnore);
    std::vector<uint8_t> mode_rows(static_cast<size_t>(B * T), 0);
    for (int64_t r = 0; r < B; ++r) {
      const auto& q = requests[static_cast<size_t>(b0 + r)];
      std::copy(q.tokens.begin(), q.tokens.end(), tokens.begin() + r * T);
      std::copy(q.targets.begin(), q.targets.end(), targets.begin() + r * T);
      if (modes) {  // padding repeats the last mode (never scored)
        const auto& m = (*modes)[static_cast<size_t>(b0 + r)];
        std::copy(m.begin(), m.end(), mode_rows.begin() + r * T);
        std::fill(mode_rows.begin() + r * T + len(b0 + r), mode_rows.begin() + (r + 1) * T, m.back());
      }
    }
    model::Batch batch;
    batch.tokens = Tensor::from_vector<int32_t>({B, T}, tokens).to(dev);
    batch.targets = Tensor::from_vector<int32_t>({B, T}, targets).to(dev);
    if (modes) batch.modes = Tensor::from_vector<uint8_t>({B, T}, mode_rows).to(dev);
    const model::StepOutput out = model_.forward(batch, /*training=*/false);
    const Tensor loss = host(out.token_loss), pred = host(out.predictions), ent = host(out.entropy);
    std::vector<Tensor> rows = model_.token_rows(out);
    AMOR_CHECK(static_cast<int64_t>(rows.size()) == R, "model.token_rows: {} rows, its columns have {}",
               rows.size(), R);
    for (Tensor& row : rows) row = host(row);
    for (int64_t r = 0; r < B; ++r) {
      const int64_t i = b0 + r, Ti = len(i);
      const auto& q = requests[static_cast<size_t>(i)];
      double* o = buf.data() + offset[static_cast<size_t>(i)];
      for (int64_t t = 0; t < Ti; ++t) {
        const int64_t k = r * T + t;
        o[t] = q.targets[static_cast<size_t>(t)] < 0 ? kNaN : loss.item(k);
        o[Ti + t] = static_cast<double>(pred.data<int32_t>()[k]);
        if (i >= recorded) continue;
        o[2 * Ti + t] = ent.item(k);
        for (int64_t g = 0; g < R; ++g) {
          const Tensor& row = rows[static_cast<size_t>(g)];
          o[(3 + g) * Ti + t] = row.defined() ? row.data<uint8_t>()[k] : 0;
        }
      }
    }
    my_done += B;
    for (int64_t r = 0; r < B; ++r) my_tokens += len(b0 + r);
    const auto now = std::chrono::steady_clock::now();
    const bool due = std::chrono::duration<double>(now - last_note).count() >= opt_.note_every_s;
    if (opt_.note && (due || (noted && my_done == my_total))) {
      last_note = now;
      noted = true;
      const double s = std::chrono::duration<double>(now - start).count();
      opt_.note(fmt::format("{}: {}/{} sequences scored ({:.0f} tokens/s)", task_, my_done, my_total,
                            s > 0 ? static_cast<double>(my_tokens) / s : 0.0));
    }
  }
  exchange(buf);

  std::vector<TeacherForcedResult> results(static_cast<size_t>(n));
  Recorded* rec = recorded > 0 ? &records_.at(task_) : nullptr;
  for (int64_t i = 0; i < n; ++i) {
    const auto& q = requests[static_cast<size_t>(i)];
    const int64_t Ti = len(i);
    const double* o = buf.data() + offset[static_cast<size_t>(i)];
    auto& res = results[static_cast<size_t>(i)];
    res.nll.assign(o, o + Ti);
    for (int64_t t = 0; t < Ti; ++t) res.argmax.push_back(static_cast<int32_t>(o[Ti + t]));
    if (i >= recorded) continue;
    rec->seqs.lengths.push_back(Ti);
    rec->seqs.token_ids.insert(rec->seqs.token_ids.end(), q.tokens.begin(), q.tokens.end());
    if (q.roles.empty())
      rec->seqs.role.insert(rec->seqs.role.end(), q.tokens.size(), 0);  // none
    else
      rec->seqs.role.insert(rec->seqs.role.end(), q.roles.begin(), q.roles.end());
    for (int64_t t = 0; t < Ti; ++t) {
      rec->seqs.loss.push_back(static_cast<float>(o[t]));
      rec->seqs.entropy.push_back(static_cast<float>(o[2 * Ti + t]));
      for (int64_t g = 0; g < R; ++g) rec->rows[static_cast<size_t>(g)].push_back(static_cast<uint8_t>(o[(3 + g) * Ti + t]));
    }
  }
  return results;
}

std::vector<TeacherForcedResult> ModelEval::teacher_forced(const std::vector<TeacherForcedRequest>& requests) {
  return score(requests, nullptr);
}

std::vector<TeacherForcedResult> ModelEval::teacher_forced_modes(
    const std::vector<TeacherForcedRequest>& requests, const std::vector<std::vector<uint8_t>>& modes) {
  AMOR_CHECK(modes_, "oryx_switch: model.kind {} has no mixer modes (only {} models switch mixer)",
             model_.config().kind, model::kinds_with(&model::KindTraits::takes_modes));
  AMOR_CHECK(modes.size() == requests.size(), "model_eval: {} mode rows for {} requests", modes.size(),
             requests.size());
  return score(requests, &modes);
}

// context ++ continuation read as input (all but the last token), scored at the continuation.
std::vector<LoglikResult> ModelEval::loglikelihood(const std::vector<LoglikRequest>& requests) {
  std::vector<TeacherForcedRequest> rows;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    AMOR_CHECK(!r.context.empty() && !r.continuation.empty(),
               "model_eval: loglikelihood request {} has an empty context or continuation", i);
    TeacherForcedRequest q;
    q.tokens = r.context;
    q.tokens.insert(q.tokens.end(), r.continuation.begin(), r.continuation.end() - 1);
    q.targets.assign(r.context.size() - 1, synthetic::kIgnore);
    q.targets.insert(q.targets.end(), r.continuation.begin(), r.continuation.end());
    rows.push_back(std::move(q));
  }
  const auto scored = score(rows, nullptr);
  std::vector<LoglikResult> out;
  for (size_t i = 0; i < requests.size(); ++i) {
    const size_t c0 = requests[i].context.size() - 1;
    LoglikResult res{0.0, true};
    for (size_t t = c0; t < rows[i].tokens.size(); ++t) {
      res.logprob -= scored[i].nll[t];
      res.greedy = res.greedy && scored[i].argmax[t] == rows[i].targets[t];
    }
    out.push_back(res);
  }
  return out;
}

// Generated ids travel as id + 1 in max_new_tokens slots per request (0 = none); then the records
// of the first requests: per token read, entropy, loss and the model's token rows[R].
std::vector<std::string> ModelEval::generate(const std::vector<GenRequest>& requests) {
  const auto n = static_cast<int64_t>(requests.size());
  const int64_t recorded = to_record(n);
  const int64_t R = rows_;
  std::vector<int64_t> slots(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    const auto& r = requests[static_cast<size_t>(i)];
    AMOR_CHECK(!r.context.empty(), "model_eval: generation request {} has an empty context", i);
    AMOR_CHECK(r.max_new_tokens >= 0, "model_eval: generation request {} asks for {} tokens", i, r.max_new_tokens);
    AMOR_CHECK(r.roles.empty() || r.roles.size() == r.context.size(),
               "model_eval: generation request {} has {} context tokens but {} roles", i, r.context.size(),
               r.roles.size());
    slots[static_cast<size_t>(i) + 1] = slots[static_cast<size_t>(i)] + r.max_new_tokens;
  }
  std::vector<double> ids(static_cast<size_t>(slots.back()), 0.0);
  std::map<int64_t, model::TokenRecords> mine_records;  // this rank's recorded requests
  // Progress (opt_.note): requests this rank has generated, of those it was dealt.
  int64_t my_total = 0, my_done = 0;
  for (int64_t b0 = 0, j = 0; b0 < n; b0 += opt_.batch_size, ++j)
    if (mine(j)) my_total += std::min(opt_.batch_size, n - b0);
  auto last_note = std::chrono::steady_clock::now();
  for (int64_t b0 = 0, j = 0; b0 < n; b0 += opt_.batch_size, ++j) {
    if (!mine(j)) continue;
    const int64_t B = std::min(opt_.batch_size, n - b0);
    // Requests of the batch with the same stop strings, stop ids and token limits decode together.
    std::vector<bool> done(static_cast<size_t>(B), false);
    for (int64_t a = 0; a < B; ++a) {
      if (done[static_cast<size_t>(a)]) continue;
      const GenRequest& head = requests[static_cast<size_t>(b0 + a)];
      std::vector<int64_t> group;
      std::vector<std::vector<int32_t>> prompts;
      for (int64_t c = a; c < B; ++c) {
        const GenRequest& r = requests[static_cast<size_t>(b0 + c)];
        if (done[static_cast<size_t>(c)] || r.stop != head.stop || r.max_new_tokens != head.max_new_tokens ||
            r.stop_ids != head.stop_ids || r.min_new_tokens != head.min_new_tokens)
          continue;
        done[static_cast<size_t>(c)] = true;
        group.push_back(b0 + c);
        prompts.push_back(r.context);
      }
      my_done += static_cast<int64_t>(group.size());
      if (head.max_new_tokens == 0) continue;
      model::GenerateOptions go;
      go.max_new_tokens = head.max_new_tokens;
      go.eos = tok_.eos_id();
      go.stop_ids = head.stop_ids;
      go.min_new_tokens = head.min_new_tokens;
      go.batch_size = opt_.batch_size;
      go.prefill_chunk = opt_.prefill_chunk;
      go.decodable_ids = tok_.vocab_size();  // never an id the tokenizer cannot decode
      const std::vector<std::string> stops = head.stop;
      if (!stops.empty())
        go.stop = [this, stops](const std::vector<int32_t>& generated) {
          const std::string text = tok_.decode(generated, /*skip_special=*/true);
          for (const auto& s : stops)
            if (!s.empty() && text.find(s) != std::string::npos) return true;
          return false;
        };
      auto gens = model::greedy_generate(model_, prompts, go);
      const auto now = std::chrono::steady_clock::now();
      if (opt_.note && !gens.empty() &&
          (my_done == my_total || std::chrono::duration<double>(now - last_note).count() >= opt_.note_every_s)) {
        last_note = now;
        // The batch greedy_generate ran last (it decodes batch_size prompts of any lengths
        // together): its size, its prompts' shortest and longest length, its times.
        size_t last = 0;
        for (size_t k = 0; k < gens.size(); ++k)
          if (gens[k].batch_index >= gens[last].batch_index) last = k;
        const model::Generation& g = gens[last];
        size_t lo = prompts[last].size(), hi = lo;
        for (size_t k = 0; k < gens.size(); ++k)
          if (gens[k].batch_index == g.batch_index) {
            lo = std::min(lo, prompts[k].size());
            hi = std::max(hi, prompts[k].size());
          }
        const std::string lengths = lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi);
        opt_.note(fmt::format(
            "{}: {}/{} requests generated; last batch: {} x {}-token prompt, prefill {:.2f} s, {} "
            "decode steps {:.2f} s ({:.1f} ms/step)",
            task_, my_done, my_total, g.group_size, lengths, g.prefill_seconds, g.decode_steps,
            g.decode_seconds, g.decode_steps > 0 ? 1e3 * g.decode_seconds / static_cast<double>(g.decode_steps) : 0.0));
      }
      for (size_t g = 0; g < gens.size(); ++g) {
        const int64_t i = group[g];
        for (size_t t = 0; t < gens[g].tokens.size(); ++t)
          ids[static_cast<size_t>(slots[static_cast<size_t>(i)]) + t] = gens[g].tokens[t] + 1.0;
        if (i < recorded) mine_records[i] = std::move(gens[g].records);
      }
    }
  }
  exchange(ids);
  std::vector<std::vector<int32_t>> generated(static_cast<size_t>(n));
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t = slots[static_cast<size_t>(i)]; t < slots[static_cast<size_t>(i) + 1]; ++t)
      if (ids[static_cast<size_t>(t)] > 0) generated[static_cast<size_t>(i)].push_back(static_cast<int32_t>(ids[static_cast<size_t>(t)]) - 1);
    out.push_back(tok_.decode(generated[static_cast<size_t>(i)], /*skip_special=*/true));
  }

  if (recorded > 0) {
    // Tokens read: the prompt, then every generated token but the last.
    auto read_len = [&](int64_t i) {
      return static_cast<int64_t>(requests[static_cast<size_t>(i)].context.size() +
                                  std::max<size_t>(generated[static_cast<size_t>(i)].size(), 1) - 1);
    };
    std::vector<int64_t> off(static_cast<size_t>(recorded) + 1, 0);
    for (int64_t i = 0; i < recorded; ++i) off[static_cast<size_t>(i) + 1] = off[static_cast<size_t>(i)] + read_len(i) * (2 + R);
    std::vector<double> buf(static_cast<size_t>(off.back()), 0.0);
    for (const auto& [i, r] : mine_records) {
      const int64_t L = read_len(i), P = static_cast<int64_t>(requests[static_cast<size_t>(i)].context.size());
      double* o = buf.data() + off[static_cast<size_t>(i)];
      for (int64_t t = 0; t < L && t < static_cast<int64_t>(r.entropy.size()); ++t) {
        o[t] = r.entropy[static_cast<size_t>(t)];
        o[L + t] = t < P - 1 ? r.loss[static_cast<size_t>(t)] : kNaN;
        for (int64_t g = 0; g < R && g < static_cast<int64_t>(r.rows.size()); ++g)
          o[(2 + g) * L + t] = r.rows[static_cast<size_t>(g)][static_cast<size_t>(t)];
      }
    }
    exchange(buf);
    Recorded& rec = records_.at(task_);
    for (int64_t i = 0; i < recorded; ++i) {
      const int64_t L = read_len(i);
      const double* o = buf.data() + off[static_cast<size_t>(i)];
      const auto& ctx = requests[static_cast<size_t>(i)].context;
      const auto& gen = generated[static_cast<size_t>(i)];
      rec.seqs.lengths.push_back(L);
      rec.seqs.token_ids.insert(rec.seqs.token_ids.end(), ctx.begin(), ctx.end());
      if (gen.size() > 1) rec.seqs.token_ids.insert(rec.seqs.token_ids.end(), gen.begin(), gen.end() - 1);
      const auto& roles = requests[static_cast<size_t>(i)].roles;  // then the answer read back
      rec.seqs.role.insert(rec.seqs.role.end(), roles.begin(), roles.end());
      rec.seqs.role.insert(rec.seqs.role.end(), static_cast<size_t>(L) - roles.size(),
                           roles.empty() ? 0 : static_cast<uint8_t>(synthetic::TokenRole::Answer));
      for (int64_t t = 0; t < L; ++t) {
        rec.seqs.entropy.push_back(static_cast<float>(o[t]));
        rec.seqs.loss.push_back(static_cast<float>(o[L + t]));
        for (int64_t g = 0; g < R; ++g) rec.rows[static_cast<size_t>(g)].push_back(static_cast<uint8_t>(o[(2 + g) * L + t]));
      }
    }
  }
  return out;
}

}  // namespace amor::eval
