// Inference over a batch of B sequences that stand at the same position: prefill the prompt
// (one or more calls), then decode one token per sequence per step, with every layer's caches
// (KV caches, conv and scan states; models/README.md "Inference"). Each call returns forward()'s
// per-token record for the new positions (StepOutput: entropy, greedy predictions, loss against
// the targets given, AMOR gates / gate entropies / tau, Oryx modes), and prefill + steps equal
// one forward(training = false) over the whole sequence up to rounding.
//
// Oryx's schedule prefill_linear_decode_attention counts the tokens given to prefill() as the
// prefill: they run linear, the steps attention. prefill() after the first step() is an error.
//
// Prompts of different lengths are prefilled in different sessions, then join() makes one
// session of their sequences, each at its own position (its KV caches keep per-sequence lengths,
// RoPE takes per-sequence positions, recurrent states do not depend on the position), whose steps
// decode them all together: each sequence's results are those of its own session up to rounding.
//
// CUDA graphs (decode_graph.h): with graphs on (AMOR_DECODE_GRAPHS=1, or use_graphs(true)) and a
// model whose step can be captured (LanguageModel::decode_graph_blocker), the first decode step
// runs eagerly, and every later step without targets runs as a graph: the graph made for its
// exclusion set (exclude_next, as a set: order and repeats do not matter) is replayed, or one is
// captured for a set not seen yet (up to kMaxDecodeGraphs per session; a further set re-captures
// in place of the least recently used). A step with targets runs eagerly; the state is the same
// either way. Otherwise every step is eager, as before. Models with attention: a graph reads the
// KV caches' storage at the captured addresses, so a step that would outgrow a cache runs eagerly
// (the cache regrows by doubling; every graph is dropped) and the next one captures anew, and a
// graph whose caches moved otherwise (reserve_tokens after the capture) is captured anew when its
// set comes next. reserve_tokens for the whole generation up front (greedy_generate and
// bench-decode do) and neither happens.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/infer/decode_graph.h"
#include "models/lm/language_model.h"

namespace amor::model {

// Columns [t0, t0 + n) of a cpu tensor [B,T] (the tensor itself when that is all of it): a
// prompt fed to a session in pieces.
Tensor columns(const Tensor& x, int64_t t0, int64_t n);

class InferenceSession {
 public:
  InferenceSession(LanguageModel& model, int64_t batch);
  // One session of the parts' sequences, in order. Each part was made for the same model and has
  // been prefilled, not stepped; the parts are consumed. The joined session starts with no
  // graphs, its graph switch that of the first part.
  static std::unique_ptr<InferenceSession> join(std::vector<std::unique_ptr<InferenceSession>> parts);

  // tokens i32 [B,T] (T >= 1); targets i32 [B,T], -100 or undefined = no loss there.
  // exclude_next: ids the prediction at each sequence's last position never takes
  // (LanguageModel::infer; greedy_generate's min_new_tokens).
  StepOutput prefill(const Tensor& tokens, const Tensor& targets = Tensor(),
                     std::span<const int32_t> exclude_next = {});
  // tokens i32 [B] or [B,1]: one new token per sequence; targets likewise (optional).
  StepOutput step(const Tensor& tokens, const Tensor& targets = Tensor(),
                  std::span<const int32_t> exclude_next = {});

  // Every sequence will hold at most `tokens` tokens in all (prompt and generation): the KV caches
  // are sized once instead of doubling as they grow (kv_cache.h). Optional; more tokens still fit.
  void reserve_tokens(int64_t tokens) { state_->reserve_tokens(tokens); }

  // Graphs on or off for this session's later steps (default: decode_graphs_from_env()). Off drops
  // a captured graph (and its memory).
  void use_graphs(bool on);
  bool graphs_on() const { return graphs_; }
  // Why this session's steps run eagerly although graphs are on ("" when they do not, or when
  // graphs are off).
  const std::string& graph_blocker() const { return blocker_; }
  // Whether the last step replayed (or captured and launched) a graph.
  bool last_step_graphed() const { return last_graphed_; }
  // Graphs captured so far (each set's first graphed step, and every re-capture).
  int64_t graph_captures() const { return captures_; }
  // Steps that would have run as a graph but ran eagerly because a KV cache had to regrow (the
  // graphs were dropped then; the next step captures anew). 0 when the session reserved its
  // tokens (reserve_tokens) for the whole generation.
  int64_t graph_room_fallbacks() const { return room_fallbacks_; }

  int64_t batch() const { return state_->batch; }
  // Tokens each sequence has been given (a joined session's sequences: an error unless they are
  // all at one position), and sequence b's.
  int64_t length() const { return state_->length(); }
  int64_t length(int64_t b) const;

 private:
  InferenceSession(LanguageModel& model, std::unique_ptr<InferenceState> state, bool graphs);

  LanguageModel& model_;
  std::unique_ptr<InferenceState> state_;
  bool decoding_ = false;
  bool graphs_ = false, last_graphed_ = false;
  std::string blocker_;
  int64_t eager_steps_ = 0;  // decode steps run eagerly (the capture waits for one)
  int64_t captures_ = 0;
  int64_t room_fallbacks_ = 0;
  DecodeGraphSlots slots_{kMaxDecodeGraphs};
  // One per slot of slots_; declared after state_: destroyed before it.
  std::vector<std::unique_ptr<DecodeGraph>> graphs_by_slot_;
};

}  // namespace amor::model
