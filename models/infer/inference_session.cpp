#include "models/infer/inference_session.h"

#include <algorithm>

#include "kernels/core/check.h"

namespace amor::model {

Tensor columns(const Tensor& x, int64_t t0, int64_t n) {
  const int64_t B = x.size(0), T = x.size(1);
  AMOR_CHECK(t0 >= 0 && n >= 0 && t0 + n <= T, "columns: [{}, {}) of {}", t0, t0 + n, x.str());
  if (t0 == 0 && n == T) return x;
  Tensor y = Tensor::empty({B, n}, x.dtype());
  for (int64_t b = 0; b < B; ++b) y.slice_flat(b * n, {n}).copy_from(x.slice_flat(b * T + t0, {n}));
  return y;
}

InferenceSession::InferenceSession(LanguageModel& model, int64_t batch)
    : model_(model), state_(model.new_inference_state(batch)) {
  use_graphs(decode_graphs_from_env());
}

InferenceSession::InferenceSession(LanguageModel& model, std::unique_ptr<InferenceState> state, bool graphs)
    : model_(model), state_(std::move(state)) {
  use_graphs(graphs);
}

std::unique_ptr<InferenceSession> InferenceSession::join(std::vector<std::unique_ptr<InferenceSession>> parts) {
  const char* op = "InferenceSession::join";
  AMOR_CHECK(!parts.empty() && parts.front() != nullptr, "{}: no sessions to join", op);
  LanguageModel& model = parts.front()->model_;
  const bool graphs = parts.front()->graphs_;
  std::vector<std::unique_ptr<InferenceState>> states;
  for (size_t i = 0; i < parts.size(); ++i) {
    AMOR_CHECK(parts[i] != nullptr, "{}: session {} is null", op, i);
    InferenceSession& s = *parts[i];
    AMOR_CHECK(&s.model_ == &model, "{}: session {} was made for another model", op, i);
    AMOR_CHECK(!s.decoding_, "{}: session {} has decoded already (join sessions after their prefill)", op, i);
    AMOR_CHECK(std::all_of(s.state_->lengths.begin(), s.state_->lengths.end(), [](int64_t n) { return n > 0; }),
               "{}: session {} has not been prefilled", op, i);
  }
  for (auto& p : parts) states.push_back(std::move(p->state_));
  parts.clear();
  return std::unique_ptr<InferenceSession>(
      new InferenceSession(model, model.join_inference_states(std::move(states)), graphs));
}

int64_t InferenceSession::length(int64_t b) const {
  AMOR_CHECK(b >= 0 && b < state_->batch, "InferenceSession::length: sequence {} of {}", b, state_->batch);
  return state_->lengths[static_cast<size_t>(b)];
}

void InferenceSession::use_graphs(bool on) {
  graphs_ = on;
  blocker_ = on ? model_.decode_graph_blocker() : std::string();
  if (!on) {
    graphs_by_slot_.clear();
    slots_.clear();
  }
}

StepOutput InferenceSession::prefill(const Tensor& tokens, const Tensor& targets,
                                     std::span<const int32_t> exclude_next) {
  AMOR_CHECK(!decoding_,
             "InferenceSession::prefill: called after step() (at position {}); a prompt is "
             "prefilled before decoding starts",
             state_->lengths.front());
  check_dim("InferenceSession::prefill", "tokens", tokens, 2);
  // Every prefilled token counts as prompt for prefill_linear_decode_attention, including these.
  state_->add_prefill(tokens.size(1));
  return model_.infer(tokens, targets, *state_, exclude_next);
}

StepOutput InferenceSession::step(const Tensor& tokens, const Tensor& targets,
                                  std::span<const int32_t> exclude_next) {
  const char* op = "InferenceSession::step";
  const int64_t B = state_->batch;
  AMOR_CHECK(tokens.defined() && (tokens.shape() == Shape({B}) || tokens.shape() == Shape({B, 1})),
             "{}: tokens {} should be [{}] or [{},1] (one token per sequence)", op,
             tokens.defined() ? tokens.str() : std::string("undefined"), B, B);
  if (targets.defined()) check_shape(op, "targets", targets, tokens.shape());
  decoding_ = true;
  last_graphed_ = false;
  const bool may_graph = decode_step_may_graph(graphs_, blocker_, targets.defined(), eager_steps_);
  // Every KV cache must take the token without regrowing; a step that would outgrow one runs
  // eagerly (its append grows the storage), and the graphs, which read the old storage, go.
  const bool room = !may_graph || state_->kv_room(1);
  if (may_graph && !room) {
    graphs_by_slot_.clear();
    slots_.clear();
    ++room_fallbacks_;
  }
  if (may_graph && room) {
    const std::vector<int32_t> key = exclusion_key(exclude_next);
    std::optional<size_t> slot = slots_.find(key);
    const DecodeStepKind kind = decode_step_kind(true, true, slot.has_value(),
                                                 slot && graphs_by_slot_[*slot]->current());
    if (kind == DecodeStepKind::Capture) {
      // Made (its ids checked and uploaded) before a slot is given up for it.
      auto graph = std::make_unique<DecodeGraph>(model_, *state_, key);
      if (!slot) slot = slots_.insert(key);
      if (*slot == graphs_by_slot_.size()) graphs_by_slot_.emplace_back();
      graphs_by_slot_[*slot].reset();  // the replaced (or stale) graph's pool goes back first
      graphs_by_slot_[*slot] = std::move(graph);
    }
    DecodeGraph& graph = *graphs_by_slot_[*slot];
    const bool capture = !graph.captured();
    StepOutput out = graph.step(tokens.view({B, 1}));
    captures_ += capture;
    last_graphed_ = true;
    return out;
  }
  ++eager_steps_;
  return model_.infer(tokens.view({B, 1}), targets.defined() ? targets.view({B, 1}) : Tensor(),
                      *state_, exclude_next);
}

}  // namespace amor::model
