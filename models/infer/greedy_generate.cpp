#include "models/infer/greedy_generate.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "kernels/core/error.h"
#include "models/infer/inference_session.h"

namespace amor::model {

namespace {

// Appends positions [t0, t0 + n) of sequence b of a step's output (tensors [B,T] on any device).
void append_records(const LanguageModel& model, TokenRecords& r, const StepOutput& out, int64_t b,
                    int64_t t0, int64_t n) {
  const int64_t T = out.entropy.size(1);
  Tensor entropy = out.entropy.to(Device::CPU), loss = out.token_loss.to(Device::CPU);
  Tensor pred = out.predictions.to(Device::CPU);
  if (r.gates.empty() && !out.gates.empty()) {
    r.gates.resize(out.gates.size());
    r.gate_entropy.resize(out.gates.size());
  }
  std::vector<Tensor> gates, gate_h;
  for (size_t k = 0; k < out.gates.size(); ++k) {
    gates.push_back(out.gates[k].to(Device::CPU));
    gate_h.push_back(out.gate_entropy[k].to(Device::CPU));
  }
  Tensor modes = out.modes.defined() ? out.modes.to(Device::CPU) : Tensor();
  std::vector<Tensor> rows = model.token_rows(out);
  for (Tensor& row : rows)
    if (row.defined()) row = row.to(Device::CPU);
  r.rows.resize(rows.size());
  for (int64_t t = t0; t < t0 + n; ++t) {
    const int64_t i = b * T + t;
    r.entropy.push_back(entropy.item(i));
    r.loss.push_back(loss.item(i));
    r.predictions.push_back(pred.data<int32_t>()[i]);
    for (size_t k = 0; k < gates.size(); ++k) {
      r.gates[k].push_back(gates[k].data<uint8_t>()[i]);
      r.gate_entropy[k].push_back(gate_h[k].item(i));
    }
    if (modes.defined()) r.modes.push_back(modes.data<uint8_t>()[i]);
    for (size_t k = 0; k < rows.size(); ++k) r.rows[k].push_back(rows[k].defined() ? rows[k].data<uint8_t>()[i] : 0);
  }
}

// Runs one batch of prompts (in `group`, sorted by length) through one decode: each run of equal
// lengths is prefilled in its own session, then the sessions join and decode together.
void generate_group(LanguageModel& model, const std::vector<std::vector<int32_t>>& prompts,
                    const std::vector<size_t>& group, int64_t batch_index, const GenerateOptions& opt,
                    std::vector<Generation>& results) {
  const int64_t B = static_cast<int64_t>(group.size());
  // The ids no token may be (those past the tokenizer's: opt.decodable_ids), and besides them
  // the ids the first min_new_tokens tokens may not be (eos and the stop ids).
  const int64_t V = model.config().vocab;
  std::vector<int32_t> never_ids;
  for (int64_t v = opt.decodable_ids > 0 ? opt.decodable_ids : V; v < V; ++v) never_ids.push_back(static_cast<int32_t>(v));
  std::vector<int32_t> end_ids = never_ids;
  end_ids.insert(end_ids.end(), opt.stop_ids.begin(), opt.stop_ids.end());
  if (opt.eos >= 0) end_ids.push_back(opt.eos);
  auto excluded = [&](int64_t generated) {
    return generated < opt.min_new_tokens ? std::span<const int32_t>(end_ids)
                                          : std::span<const int32_t>(never_ids);
  };
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  const Clock::time_point t0 = Clock::now();
  std::vector<int32_t> next(static_cast<size_t>(B));
  std::vector<bool> live(static_cast<size_t>(B), opt.max_new_tokens > 0);
  std::vector<std::unique_ptr<InferenceSession>> sessions;
  for (int64_t r0 = 0; r0 < B;) {  // rows [r0, r1) of the batch: one prompt length
    const int64_t P = static_cast<int64_t>(prompts[group[static_cast<size_t>(r0)]].size());
    int64_t r1 = r0 + 1;
    while (r1 < B && static_cast<int64_t>(prompts[group[static_cast<size_t>(r1)]].size()) == P) ++r1;
    const int64_t n = r1 - r0;
    Tensor tokens = Tensor::empty({n, P}, DType::I32), targets = Tensor::empty({n, P}, DType::I32);
    for (int64_t b = 0; b < n; ++b) {
      const std::vector<int32_t>& p = prompts[group[static_cast<size_t>(r0 + b)]];
      for (int64_t t = 0; t < P; ++t) {
        tokens.data<int32_t>()[b * P + t] = p[static_cast<size_t>(t)];
        targets.data<int32_t>()[b * P + t] = t + 1 < P ? p[static_cast<size_t>(t + 1)] : -100;
      }
    }
    sessions.push_back(std::make_unique<InferenceSession>(model, n));
    sessions.back()->reserve_tokens(P + opt.max_new_tokens);  // the prompt and every token fed back
    // In calls of opt.prefill_chunk tokens; only the last call's last prediction is generated, so
    // only it excludes the ids the first token may not be.
    const int64_t chunk = opt.prefill_chunk > 0 ? opt.prefill_chunk : P;
    for (int64_t t0 = 0; t0 < P; t0 += chunk) {
      const int64_t c = std::min(chunk, P - t0);
      const bool last = t0 + c == P;
      StepOutput out = sessions.back()->prefill(columns(tokens, t0, c), columns(targets, t0, c),
                                                last ? excluded(0) : std::span<const int32_t>());
      Tensor pred = last ? out.predictions.to(Device::CPU) : Tensor();
      for (int64_t b = 0; b < n; ++b) {
        Generation& g = results[group[static_cast<size_t>(r0 + b)]];
        append_records(model, g.records, out, b, 0, c);
        if (!last) continue;
        next[static_cast<size_t>(r0 + b)] = pred.data<int32_t>()[b * c + c - 1];
        if (opt.max_new_tokens == 0) g.stop_reason = "max_new_tokens";
      }
    }
    r0 = r1;
  }
  std::unique_ptr<InferenceSession> session;
  if (opt.max_new_tokens > 0)
    session = sessions.size() == 1 ? std::move(sessions.front()) : InferenceSession::join(std::move(sessions));
  const Clock::time_point t1 = Clock::now();  // the predictions above came back: prefill done
  int64_t generated = 0;  // tokens each live sequence of the group has generated
  while (true) {
    ++generated;
    bool any = false;
    for (int64_t b = 0; b < B; ++b) {
      if (!live[static_cast<size_t>(b)]) continue;
      Generation& g = results[group[static_cast<size_t>(b)]];
      const int32_t tok = next[static_cast<size_t>(b)];
      g.tokens.push_back(tok);
      if (opt.eos >= 0 && tok == opt.eos)
        g.stop_reason = "eos";
      else if (std::find(opt.stop_ids.begin(), opt.stop_ids.end(), tok) != opt.stop_ids.end())
        g.stop_reason = "stop_id";
      else if (opt.stop && opt.stop(g.tokens))
        g.stop_reason = "stop";
      else if (static_cast<int64_t>(g.tokens.size()) >= opt.max_new_tokens)
        g.stop_reason = "max_new_tokens";
      live[static_cast<size_t>(b)] = g.stop_reason.empty();
      any = any || live[static_cast<size_t>(b)];
    }
    if (!any) break;
    const StepOutput out = session->step(Tensor::from_vector<int32_t>({B}, next), Tensor(), excluded(generated));
    Tensor pred = out.predictions.to(Device::CPU);
    for (int64_t b = 0; b < B; ++b) {
      if (!live[static_cast<size_t>(b)]) continue;
      append_records(model, results[group[static_cast<size_t>(b)]].records, out, b, 0, 1);
      next[static_cast<size_t>(b)] = pred.data<int32_t>()[b];
    }
  }
  const Clock::time_point t2 = Clock::now();
  for (size_t i : group) {
    results[i].prefill_seconds = seconds(t0, t1);
    results[i].decode_seconds = seconds(t1, t2);
    results[i].decode_steps = generated - 1;
    results[i].group_size = B;
    results[i].batch_index = batch_index;
  }
}

}  // namespace

std::vector<Generation> greedy_generate(LanguageModel& model,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const GenerateOptions& options) {
  AMOR_CHECK(options.max_new_tokens >= 0, "greedy_generate: max_new_tokens {} must be >= 0",
             options.max_new_tokens);
  AMOR_CHECK(options.min_new_tokens >= 0, "greedy_generate: min_new_tokens {} must be >= 0",
             options.min_new_tokens);
  AMOR_CHECK(options.batch_size >= 1, "greedy_generate: batch_size {} must be >= 1",
             options.batch_size);
  AMOR_CHECK(options.prefill_chunk >= 0, "greedy_generate: prefill_chunk {} must be >= 0 (0: whole prompts)",
             options.prefill_chunk);
  for (size_t i = 0; i < prompts.size(); ++i)
    AMOR_CHECK(!prompts[i].empty(), "greedy_generate: prompt {} is empty", i);
  // Batches of similar lengths (fewer prefill sessions per batch), each prompt's results its own.
  std::vector<size_t> order(prompts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return prompts[a].size() < prompts[b].size(); });
  std::vector<Generation> results(prompts.size());
  const size_t bs = static_cast<size_t>(options.batch_size);
  for (size_t s = 0; s < order.size(); s += bs)
    generate_group(model, prompts,
                   std::vector<size_t>(order.begin() + static_cast<std::ptrdiff_t>(s),
                                       order.begin() + static_cast<std::ptrdiff_t>(std::min(s + bs, order.size()))),
                   static_cast<int64_t>(s / bs), options, results);
  return results;
}

}  // namespace amor::model
