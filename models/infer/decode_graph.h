// CUDA graphs of decode steps (issue #18; README "Inference"): at batch 1 a decode step is a few
// hundred small kernels, and launching them from the host costs more than the step's arithmetic
// (tests/cuda/RESULTS.md, 2026-12-02). A DecodeGraph records one step of a model with stream
// capture and replays it for every later step: one launch per step.
//
// What is captured: LanguageModel::infer_on_device for one token per sequence: embedding, every
// layer's step (recurrent states updated in place), norm_f, and the LM head's entropy and greedy
// argmax (lm_head_decode), with token_loss zeros. Inputs: the step's tokens are copied (outside
// the graph) into the captured input buffer [B,1]; outputs: the captured output tensors, copied
// to fresh tensors after each replay so that a StepOutput stays valid after the next step.
// Nothing in the captured region reads the device from the host: -exp(A_log) is computed once
// per cache (the mixers' first step), the embedding's bad-id check is skipped under capture
// (embedding_cuda.cu; ids copied from the host are checked here instead), and the targets'
// loss sums are not computed (steps with targets or exclusions run eagerly).
//
// Which kinds: LanguageModel::decode_graph_blocker() says why a model cannot; today mamba2, gdn
// and serial patterns of M and G only, on the GPU. Attention (transformer, serial with A, AMOR,
// Oryx, fused) stays eager: its kernels take the KV length and cache address as launch arguments.
//
// Memory: allocations made during capture come from a private pool of the caching allocator
// (caching_allocator.h), whose blocks stay reserved for the graph until it is destroyed.
//
// The switch: AMOR_DECODE_GRAPHS=1 (decode_graphs_from_env) turns graphs on in InferenceSession
// (default off until verified on the GPU); InferenceSession::use_graphs overrides it per session.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/core/caching_allocator.h"
#include "models/lm/language_model.h"

namespace amor::model {

// AMOR_DECODE_GRAPHS: "1" on, unset / "0" off, anything else an error; read once per process.
bool decode_graphs_from_env();
// The same for a given value of the variable (nullptr: unset), for tests.
bool parse_decode_graphs(const char* value);

class DecodeGraph {
 public:
  // model.decode_graph_blocker() must be "". The state must have run at least one eager step (the
  // states exist, the kernels' one-time setup is done) and stays owned by the caller.
  DecodeGraph(LanguageModel& model, InferenceState& state);
  ~DecodeGraph();
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  // One step: tokens i32 [B,1] (host or device). The first call captures, then launches; later
  // calls replay. Advances the state as InferenceSession::step does.
  StepOutput step(const Tensor& tokens);
  bool captured() const { return graph_ != nullptr; }

 private:
  LanguageModel& model_;
  InferenceState& state_;
  CachingAllocator& alloc_;
  PoolId pool_ = 0;
  void* graph_ = nullptr;
  Tensor tokens_;   // i32 [B,1] on the device: the captured input
  StepOutput out_;  // the captured outputs
};

}  // namespace amor::model
