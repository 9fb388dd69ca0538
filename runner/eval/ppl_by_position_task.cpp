// Perplexity by token position (length extrapolation): sequences of seq_len tokens, usually longer
// than the training length, scored teacher-forced; the NLL at input position t (predicting token
// t + 1) goes to bucket [a, b) with a <= t < b.
//   text: a .jsonl file ({"text"} per line), any other file (one document), or "" for the
//         built-in King James Bible (data/corpus); documents are encoded and joined with EOS
//         after each (as the token shards are), and sequence k is stream[k L, k L + L + 1), L =
//         seq_len (the loader's packing), for k < num_sequences
//   ppl        = exp(mean NLL over every position of every sequence)
//   ppl_<a>_<b> = exp(mean NLL over positions [a, b) of every sequence)
//   per example (one per bucket): position = a, loss = mean NLL of the bucket
#include <cmath>
#include <fstream>
#include <sstream>

#include "data/corpus/kjv.h"
#include "kernels/core/error.h"
#include "runner/eval/jsonl_records.h"
#include "runner/eval/task_runners.h"

namespace amor::eval {
namespace {

std::vector<std::string> documents(const TaskSpec& spec) {
  std::vector<std::string> docs;
  if (spec.path.empty()) {
    for (auto& c : corpus::kjv_chapters()) docs.push_back(std::move(c.text));
  } else if (spec.path.size() >= 6 && spec.path.substr(spec.path.size() - 6) == ".jsonl") {
    for (const auto& r : read_jsonl(spec.path, -1, spec.name)) docs.push_back(r.string("text"));
  } else {
    std::ifstream in(spec.path, std::ios::binary);
    AMOR_CHECK(in.good(), "{}: {}: no such file or not readable", spec.name, spec.path);
    std::ostringstream s;
    s << in.rdbuf();
    docs.push_back(s.str());
  }
  return docs;
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> position_buckets(int64_t seq_len, int64_t bucket_size) {
  AMOR_CHECK(seq_len > 0 && bucket_size > 0,
             "ppl_by_position: seq_len ({}) and bucket_size ({}) must be positive", seq_len,
             bucket_size);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t a = 0; a < seq_len; a += bucket_size) out.emplace_back(a, std::min(a + bucket_size, seq_len));
  return out;
}

std::vector<std::vector<int32_t>> packed_sequences(const std::string& task, const std::string& path,
                                                   int64_t seq_len, int64_t num_sequences,
                                                   const Tokenizer& tok) {
  AMOR_CHECK(num_sequences > 0, "{}: num_sequences must be positive, got {}", task, num_sequences);
  AMOR_CHECK(seq_len > 0, "{}: seq_len must be positive, got {}", task, seq_len);
  AMOR_CHECK(tok.eos_id() >= 0, "{}: tokenizer '{}' has no EOS to separate documents", task,
             tok.name());
  const auto L = static_cast<size_t>(seq_len);
  const size_t needed = static_cast<size_t>(num_sequences) * L + 1;
  TaskSpec where;
  where.name = task;
  where.path = path;
  std::vector<int32_t> stream;
  for (const auto& d : documents(where)) {
    if (stream.size() >= needed) break;
    tok.encode_into(d, stream);
    stream.push_back(tok.eos_id());
  }
  AMOR_CHECK(stream.size() >= needed,
             "{}: {} holds {} tokens, fewer than the {} that {} sequences of {} tokens need", task,
             path.empty() ? std::string("the KJV corpus") : path, stream.size(), needed,
             num_sequences, seq_len);
  std::vector<std::vector<int32_t>> out;
  for (size_t k = 0; k < static_cast<size_t>(num_sequences); ++k) {
    auto begin = stream.begin() + static_cast<std::ptrdiff_t>(k * L);
    out.emplace_back(begin, begin + static_cast<std::ptrdiff_t>(L) + 1);
  }
  return out;
}

TaskResult run_ppl_by_position(const TaskSpec& spec, EvalModel& model) {
  const auto buckets = position_buckets(spec.seq_len, spec.bucket_size);
  const auto L = static_cast<size_t>(spec.seq_len);
  std::vector<TeacherForcedRequest> requests;
  for (auto& s : packed_sequences(spec.name, spec.path, spec.seq_len, spec.num_sequences, model.tokenizer()))
    requests.push_back({std::vector<int32_t>(s.begin(), s.end() - 1), std::vector<int32_t>(s.begin() + 1, s.end())});
  model.begin_task(spec.name);
  const auto results = model.teacher_forced(requests);
  AMOR_CHECK(results.size() == requests.size(), "{}: the model answered {} of {} requests",
             spec.name, results.size(), requests.size());
  std::vector<double> sum(buckets.size(), 0.0), all;
  for (const auto& r : results) {
    AMOR_CHECK(r.nll.size() == L, "{}: the model returned {} losses for a sequence of {} tokens",
               spec.name, r.nll.size(), L);
    for (size_t t = 0; t < L; ++t) {
      sum[t / static_cast<size_t>(spec.bucket_size)] += r.nll[t];
      all.push_back(r.nll[t]);
    }
  }
  TaskResult out;
  out.metrics["ppl"] = std::exp(mean_or_nan(all));
  for (size_t b = 0; b < buckets.size(); ++b) {
    const auto [lo, hi] = buckets[b];
    const double loss = sum[b] / static_cast<double>((hi - lo) * spec.num_sequences);
    out.metrics[fmt::format("ppl_{}_{}", lo, hi)] = std::exp(loss);
    out.per_example["position"].push_back(static_cast<double>(lo));
    out.per_example["loss"].push_back(loss);
  }
  return out;
}

}  // namespace amor::eval
