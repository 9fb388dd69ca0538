// CUDA graphs of decode steps (issue #18; README "Inference"): at batch 1 a decode step is a few
// hundred small kernels, and launching them from the host costs more than the step's arithmetic
// (tests/cuda/RESULTS.md, 2026-12-02). A DecodeGraph records one step of a model with stream
// capture and replays it for every later step: one launch per step.
//
// What is captured: LanguageModel::infer_on_device for one token per sequence: embedding, every
// layer's step (recurrent states updated in place), norm_f, and the LM head's entropy and greedy
// argmax (lm_head_decode), with token_loss zeros, and, when the graph has an exclusion set, the
// argmax again over the ids it leaves (lm_head_argmax with an ArgmaxExclusion: the ids were
// uploaded once, when the graph was made, and the graph reads them at that address). Inputs:
// the step's tokens are copied (outside the graph) into the captured input buffer [B,1];
// outputs: the captured output tensors, copied to fresh tensors after each replay so that a
// StepOutput stays valid after the next step. Nothing in the captured region reads the device
// from the host: -exp(A_log) is computed once per cache (the mixers' first step), the
// embedding's bad-id check is skipped under capture (embedding_cuda.cu; ids copied from the host
// are checked here instead), and the targets' loss sums are not computed (steps with targets run
// eagerly).
//
// Exclusion sets (greedy generation excludes the ids past the tokenizer's vocabulary at every
// step, and eos / stop ids too while fewer than min_new_tokens were generated): a graph replays
// only steps whose set (sorted, without repeats) is the one it was made with, so its argmax is
// the eager step's bit for bit. InferenceSession keeps one graph per set, up to
// kMaxDecodeGraphs (DecodeGraphSlots): a generation's two sets get one capture each, and a
// further set re-captures in place of the least recently used. Why capture for a new set rather
// than run its steps eagerly: a set usually lasts (the steady one for the rest of a generation,
// and the min_new_tokens one may come first, at the step that would otherwise be captured), and
// a capture costs about an eager step plus the graph's instantiation; two slots keep a
// generation's switch between its two sets from re-capturing at all. An exclusion costs a second
// pass over the LM head in the graph as in an eager step (the entropy stays the whole
// vocabulary's, the argmax skips the ids).
//
// Which kinds (on the GPU; LanguageModel::decode_graph_blocker() says why a model cannot):
// mamba2, gdn, transformer, serial (any pattern of M, G and A), fused, and AMOR in its dense
// inference form (AMOR_BLOCK_INFERENCE=dense, AmorModel::set_sparse_inference(false)), with the
// LM-head gates or a fitted entropy router; the kinds with attention only while the KV caches'
// step path is on (the default; AMOR_KV_STEP_PATH=0 switches it off). Attention
// is capturable since its KV caches run decode steps on their step path (kv_cache.h, issue #18):
// the lengths live on the device (i32 [B]), RoPE reads them there, the append kernel writes each
// sequence's token at its length and advances it there, and one attention launch serves every
// sequence over the cache's storage with a launch shape planned for the capacity, not the
// lengths; so no launch argument changes from step to step. Not capturable: Oryx (each step
// computes its tokens' modes on the host, copies them to the device and chooses on the host which
// paths run), AMOR's sparse form (each block reads its firing rows back to the host every step:
// they decide the kernels' shapes), AMOR with a block observer (host code), and anything on the
// cpu or with unit hooks. AMOR's dense form with a fitted entropy router is capturable (the
// router's parameters and its column of ones stay on the device: entropy_router.h).
//
// KV caches under replay: the host code does not run, so after each replay
// LanguageModel::replayed_step advances every KV cache's host lengths (KvCache::replayed; the
// replay advanced the device ones). The graph reads the caches' storage and device lengths at
// the addresses of its capture (InferenceState::graph_signature, recorded then): a replay is
// valid only while they stay and every cache has room for the step's token
// (InferenceState::kv_room). InferenceSession runs a step that would outgrow a cache eagerly (its
// append grows the storage by doubling) and drops its graphs, so the next step captures anew,
// and re-captures a graph whose caches moved otherwise (reserve_tokens after the capture).
// Generations reserve their whole length up front (greedy_generate: prompt + max_new_tokens;
// bench-decode: context + every step), so these re-captures are rare; a session that does not
// reserve re-captures once per doubling of its caches. AMOR's per-call host counters
// (last_projection_rows) are not updated by replays, and a parameter written while a session
// replays (alpha, the gate state, A_log) is not seen by its graphs: write them before decoding.
//
// Memory: allocations made during capture come from a private pool of the caching allocator
// (caching_allocator.h), whose blocks stay reserved for the graph until it is destroyed.
//
// The switch: AMOR_DECODE_GRAPHS=1 (decode_graphs_from_env) turns graphs on in InferenceSession
// (default off until verified on the GPU); InferenceSession::use_graphs overrides it per session.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/caching_allocator.h"
#include "models/lm/language_model.h"

namespace amor::model {

// AMOR_DECODE_GRAPHS: "1" on, unset / "0" off, anything else an error; read once per process.
bool decode_graphs_from_env();
// The same for a given value of the variable (nullptr: unset), for tests.
bool parse_decode_graphs(const char* value);

// Whether a decode step may run as a graph (replayed, or captured first): graphs on, the model
// capturable (blocker ""), no targets (their loss sums are read back on the host), and an eager
// decode step already run (the capture needs the caches' one-time setup done). The exclusion set
// does not decide it: it picks the graph (DecodeGraphSlots).
bool decode_step_may_graph(bool graphs_on, const std::string& blocker, bool has_targets,
                           int64_t eager_steps);

// How a decode step runs: eagerly, as a new capture (no graph for its exclusion set yet, or the
// set's graph is not current: a KV cache's storage moved since it was captured), or as a replay.
// may_graph: decode_step_may_graph's answer; room: every KV cache can take the step's token
// without regrowing (InferenceState::kv_room(1)): a step without room runs eagerly (its append
// grows the storage) and the next step captures anew.
enum class DecodeStepKind { Eager, Capture, Replay };
DecodeStepKind decode_step_kind(bool may_graph, bool room, bool have_graph, bool graph_current);

// An exclusion set as a graph is keyed by: sorted, without repeats.
std::vector<int32_t> exclusion_key(std::span<const int32_t> exclude_next);

// How many graphs (one per exclusion set) an InferenceSession keeps.
inline constexpr size_t kMaxDecodeGraphs = 2;

// Which graph serves which exclusion set, without the graphs (they need the GPU; this is the
// part tests can run on the cpu): up to `capacity` slots, each keyed by an exclusion_key, the
// least recently used given up when a new set needs a slot.
class DecodeGraphSlots {
 public:
  explicit DecodeGraphSlots(size_t capacity);
  // The slot holding `key`, marked most recently used; nullopt when none does.
  std::optional<size_t> find(const std::vector<int32_t>& key);
  // A slot for a key find() did not find: a free one, else the least recently used (whose graph
  // the caller replaces). Marked most recently used.
  size_t insert(const std::vector<int32_t>& key);
  void clear();
  size_t size() const { return keys_.size(); }

 private:
  size_t capacity_;
  std::vector<std::vector<int32_t>> keys_;
  std::vector<uint64_t> used_;  // the tick of each slot's last find or insert
  uint64_t tick_ = 0;
};

class DecodeGraph {
 public:
  // model.decode_graph_blocker() must be "". The state must have run at least one eager step (the
  // states exist, the kernels' one-time setup is done) and stays owned by the caller.
  // exclude_next: the ids every step of this graph never predicts (infer()'s), uploaded here.
  DecodeGraph(LanguageModel& model, InferenceState& state,
              std::span<const int32_t> exclude_next = {});
  ~DecodeGraph();
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  // One step: tokens i32 [B,1] (host or device). The first call captures, then launches; later
  // calls replay. Advances the state as InferenceSession::step does.
  // The state's KV caches must have room for the token (InferenceState::kv_room(1)) and, after
  // the capture, sit where they sat then (current()); an amor::Error otherwise.
  StepOutput step(const Tensor& tokens);
  bool captured() const { return graph_ != nullptr; }
  // Not captured yet, or the state's graph_signature() (KV cache storage and device lengths,
  // capacities) is the captured one: a replay reads valid addresses.
  bool current() const;
  // The exclusion set the graph was made with (sorted, without repeats).
  const std::vector<int32_t>& excluded() const { return exclude_.ids; }

 private:
  LanguageModel& model_;
  InferenceState& state_;
  CachingAllocator& alloc_;
  ArgmaxExclusion exclude_;  // outside the pool; outlives graph_ (destroyed in ~DecodeGraph)
  PoolId pool_ = 0;
  void* graph_ = nullptr;
  Tensor tokens_;   // i32 [B,1] on the device: the captured input
  StepOutput out_;  // the captured outputs
  std::vector<uintptr_t> signature_;  // the state's graph_signature() at the capture
};

}  // namespace amor::model
