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
  if (!on) graph_.reset();
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
  if (graphs_ && blocker_.empty() && !targets.defined() && exclude_next.empty() &&
      eager_steps_ > 0) {
    if (!graph_) graph_ = std::make_unique<DecodeGraph>(model_, *state_);
    StepOutput out = graph_->step(tokens.view({B, 1}));
    last_graphed_ = true;
    return out;
  }
  ++eager_steps_;
  return model_.infer(tokens.view({B, 1}), targets.defined() ? targets.view({B, 1}) : Tensor(),
                      *state_, exclude_next);
}

}  // namespace amor::model
