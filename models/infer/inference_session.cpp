#include "models/infer/inference_session.h"

#include "kernels/core/check.h"

namespace amor::model {

InferenceSession::InferenceSession(LanguageModel& model, int64_t batch)
    : model_(model), state_(model.new_inference_state(batch)) {
  use_graphs(decode_graphs_from_env());
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
             state_->length);
  check_dim("InferenceSession::prefill", "tokens", tokens, 2);
  // Every prefilled token counts as prompt for prefill_linear_decode_attention, including these.
  state_->prefill_len += tokens.size(1);
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
  if (decode_step_may_graph(graphs_, blocker_, targets.defined(), eager_steps_)) {
    const std::vector<int32_t> key = exclusion_key(exclude_next);
    std::optional<size_t> slot = slots_.find(key);
    if (!slot) {
      // Made (its ids checked and uploaded) before a slot is given up for it.
      auto graph = std::make_unique<DecodeGraph>(model_, *state_, key);
      slot = slots_.insert(key);
      if (*slot == graphs_by_slot_.size()) graphs_by_slot_.emplace_back();
      graphs_by_slot_[*slot].reset();  // the replaced graph's pool goes back first
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
