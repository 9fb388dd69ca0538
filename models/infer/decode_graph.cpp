#include "models/infer/decode_graph.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/core/backend.h"
#include "kernels/core/check.h"

namespace amor::model {

bool parse_decode_graphs(const char* value) {
  if (value == nullptr || std::strcmp(value, "") == 0 || std::strcmp(value, "0") == 0) return false;
  if (std::strcmp(value, "1") == 0) return true;
  throw Error(fmt::format("AMOR_DECODE_GRAPHS='{}': use 1 (CUDA graphs for decode steps) or 0", value));
}

bool decode_graphs_from_env() {
  static const bool on = parse_decode_graphs(std::getenv("AMOR_DECODE_GRAPHS"));
  return on;
}

bool decode_step_may_graph(bool graphs_on, const std::string& blocker, bool has_targets,
                           int64_t eager_steps) {
  return graphs_on && blocker.empty() && !has_targets && eager_steps > 0;
}

DecodeStepKind decode_step_kind(bool may_graph, bool room, bool have_graph, bool graph_current) {
  if (!may_graph || !room) return DecodeStepKind::Eager;
  return have_graph && graph_current ? DecodeStepKind::Replay : DecodeStepKind::Capture;
}

std::vector<int32_t> exclusion_key(std::span<const int32_t> exclude_next) {
  std::vector<int32_t> key(exclude_next.begin(), exclude_next.end());
  std::sort(key.begin(), key.end());
  key.erase(std::unique(key.begin(), key.end()), key.end());
  return key;
}

DecodeGraphSlots::DecodeGraphSlots(size_t capacity) : capacity_(capacity) {
  AMOR_CHECK(capacity >= 1, "DecodeGraphSlots: capacity {} must be >= 1", capacity);
}

std::optional<size_t> DecodeGraphSlots::find(const std::vector<int32_t>& key) {
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) {
      used_[i] = ++tick_;
      return i;
    }
  return std::nullopt;
}

size_t DecodeGraphSlots::insert(const std::vector<int32_t>& key) {
  size_t slot = keys_.size();
  if (slot < capacity_) {
    keys_.push_back(key);
    used_.push_back(0);
  } else {
    slot = static_cast<size_t>(std::min_element(used_.begin(), used_.end()) - used_.begin());
    keys_[slot] = key;
  }
  used_[slot] = ++tick_;
  return slot;
}

void DecodeGraphSlots::clear() {
  keys_.clear();
  used_.clear();
}

namespace {
Device device_of(LanguageModel& model) {
  const auto& params = model.params().params();
  AMOR_CHECK(!params.empty(), "DecodeGraph: the model has no parameters");
  return params.front()->value.device();
}
}  // namespace

DecodeGraph::DecodeGraph(LanguageModel& model, InferenceState& state,
                         std::span<const int32_t> exclude_next)
    : model_(model), state_(state), alloc_(allocator(device_of(model))) {
  const std::string why = model.decode_graph_blocker();
  AMOR_CHECK(why.empty(), "DecodeGraph: {}", why);
  AMOR_CHECK(std::all_of(state.lengths.begin(), state.lengths.end(), [](int64_t n) { return n > 0; }),
             "DecodeGraph: capture after at least one eager step (the state has seen no token)");
  tokens_ = Tensor::zeros({state.batch, 1}, DType::I32, device_of(model));
  // Checked and uploaded now, outside the capture and the graph's pool.
  exclude_ = model.exclusion_for(exclude_next);
}

bool DecodeGraph::current() const { return !graph_ || state_.graph_signature() == signature_; }

DecodeGraph::~DecodeGraph() {
  out_ = StepOutput();  // the captured outputs go back to the pool first
  if (graph_) alloc_.backend().destroy_graph(graph_);
  if (pool_) alloc_.release_pool(pool_);
}

StepOutput DecodeGraph::step(const Tensor& tokens) {
  const char* op = "DecodeGraph::step";
  const int64_t B = state_.batch;
  check_dtype(op, "tokens", tokens, DType::I32);
  AMOR_CHECK(tokens.numel() == B, "{}: tokens {} for {} sequences", op, tokens.str(), B);
  if (tokens.is_cpu()) {
    // The captured embedding does not check its ids (nothing may be read back inside a graph).
    const int64_t V = model_.config().vocab;
    const int32_t* t = tokens.data<int32_t>();
    for (int64_t b = 0; b < B; ++b)
      AMOR_CHECK(t[b] >= 0 && t[b] < V, "{}: token {} of sequence {} is outside the vocabulary [0, {})",
                 op, t[b], b, V);
  }
  // A KV cache's append must not regrow its storage inside the capture (the new storage would
  // come from the graph's pool) nor outside the captured one at a replay (InferenceSession runs
  // such a step eagerly and captures anew).
  AMOR_CHECK(state_.kv_room(1),
             "{}: a KV cache has no room for another token without regrowing (run this step "
             "eagerly, then capture anew)", op);
  AMOR_CHECK(current(),
             "{}: a KV cache's storage or device lengths moved since the capture (the graph "
             "reads the old addresses): capture anew", op);
  // Outside the graph, on the compute stream: ordered before the replay that reads it.
  tokens_.copy_from(tokens.view({B, 1}));
  Backend& be = alloc_.backend();
  if (!graph_) {
    signature_ = state_.graph_signature();
    pool_ = alloc_.create_pool();
    be.begin_capture();
    try {
      PoolScope scope(alloc_, pool_);
      out_ = model_.infer_on_device(tokens_, state_, exclude_);
    } catch (...) {
      be.abort_capture();
      throw;
    }
    graph_ = be.end_capture();
    AMOR_CHECK(state_.graph_signature() == signature_,
               "{}: a KV cache moved during the capture (it should have had room)", op);
    // The capture ran the host code once (the mixers' counters and the KV caches' host lengths
    // advanced) but no kernel: this step's work is the first launch.
    be.launch_graph(graph_);
    state_.advance(1);
  } else {
    be.launch_graph(graph_);
    model_.replayed_step(state_, 1);
  }
  // Fresh copies (outside the pool): the next replay overwrites the captured outputs.
  StepOutput out;
  out.entropy = out_.entropy.clone();
  out.predictions = out_.predictions.clone();
  out.token_loss = out_.token_loss.clone();
  for (const Tensor& g : out_.gates) out.gates.push_back(g.clone());
  for (const Tensor& e : out_.gate_entropy) out.gate_entropy.push_back(e.clone());
  out.tau = out_.tau;  // host values (AMOR's frozen thresholds)
  return out;
}

}  // namespace amor::model
