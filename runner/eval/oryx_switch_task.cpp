// Perplexity around a mixer switch (Oryx models): how a multi-mixer model's loss behaves when the
// mixer changes along the sequence. Sequences of seq_len tokens (text as ppl_by_position packs
// it) are scored teacher-forced with the mixer `before` at input positions t < s and `after` at
// t >= s (s = switch_at; both memories see every token, so only the reading mixer changes). The
// NLL at input position t predicts token t + 1; offset = t - s, for offsets -window .. window-1.
//   per example (one per offset): offset, loss = mean NLL at that offset over the sequences
//   ppl_before = exp(mean NLL over offsets < 0), ppl_after = exp(mean NLL over offsets >= 0)
#include <cmath>

#include "kernels/core/error.h"
#include "runner/eval/task_runners.h"

namespace amor::eval {

TaskResult run_oryx_switch(const TaskSpec& spec, EvalModel& model) {
  const int64_t L = spec.seq_len, s = spec.switch_at, w = spec.window;
  AMOR_CHECK(s > 0 && s < L, "{}: switch_at must be inside the sequence (0 < s < seq_len = {}), got {}",
             spec.name, L, s);
  AMOR_CHECK(w > 0 && w <= s && s + w <= L,
             "{}: window {} must be positive and fit around switch_at {} in seq_len {}", spec.name,
             w, s, L);
  std::vector<TeacherForcedRequest> requests;
  std::vector<std::vector<uint8_t>> modes;
  for (auto& seq : packed_sequences(spec.name, spec.path, L, spec.num_sequences, model.tokenizer())) {
    requests.push_back({std::vector<int32_t>(seq.begin(), seq.end() - 1),
                        std::vector<int32_t>(seq.begin() + 1, seq.end())});
    std::vector<uint8_t> m(static_cast<size_t>(L), spec.after);
    std::fill(m.begin(), m.begin() + s, spec.before);
    modes.push_back(std::move(m));
  }
  model.begin_task(spec.name);
  const auto results = model.teacher_forced_modes(requests, modes);
  AMOR_CHECK(results.size() == requests.size(), "{}: the model answered {} of {} requests",
             spec.name, results.size(), requests.size());
  TaskResult out;
  std::vector<double> before, after;
  for (int64_t off = -w; off < w; ++off) {
    double sum = 0;
    for (const auto& r : results) {
      AMOR_CHECK(static_cast<int64_t>(r.nll.size()) == L,
                 "{}: the model returned {} losses for a sequence of {} tokens", spec.name,
                 r.nll.size(), L);
      sum += r.nll[static_cast<size_t>(s + off)];
      (off < 0 ? before : after).push_back(r.nll[static_cast<size_t>(s + off)]);
    }
    out.per_example["offset"].push_back(static_cast<double>(off));
    out.per_example["loss"].push_back(sum / static_cast<double>(results.size()));
  }
  out.metrics["ppl_before"] = std::exp(mean_or_nan(before));
  out.metrics["ppl_after"] = std::exp(mean_or_nan(after));
  return out;
}

}  // namespace amor::eval
