#include "models/lm/language_model.h"

#include <algorithm>
#include <typeinfo>

#include "kernels/core/check.h"
#include "kernels/core/profile.h"
#include "kernels/embedding/embedding.h"
#include "kernels/lm_head_loss/lm_head_argmax.h"
#include "kernels/lm_head_loss/lm_head_loss.h"
#include "models/amor/amor_model.h"
#include "models/core/norm_eps.h"
#include "models/infer/kv_cache.h"
#include "models/lm/model_kinds.h"
#include "models/oryx/oryx_modes.h"
#include "models/lm/stack_inference_state.h"

#include <random>

namespace amor::model {

LanguageModel::LanguageModel(const ModelConfig& cfg, DType dtype) : cfg_(cfg), params_(dtype) {
  params_.begin_unit("embed");
  // Tied: the same matrix embeds tokens and, transposed, is the LM head. Decayed like any matrix.
  embed_ = params_.add("embed_tokens.weight", {cfg.vocab, cfg.d_model}, init_normal(cfg.init_std), true);
}

namespace {

// out.n_valid and out.loss_sum over the positions with a target (on the host: one copy of the
// targets and losses per batch when they live on the GPU).
void count_loss(const Tensor& targets, const Tensor& loss, StepOutput& out) {
  const Tensor tg = targets.to(Device::CPU), l = loss.to(Device::CPU);
  const int32_t* t = tg.data<int32_t>();
  for (int64_t i = 0; i < tg.numel(); ++i) {
    if (t[i] == -100) continue;
    out.n_valid++;
    out.loss_sum += l.item(i);
  }
}

// With ids to exclude: the prediction at each sequence's last position of predictions i32 [B,T]
// again, over the ids `excluded` leaves (a second pass over the vocabulary, so the entropy stays
// the whole vocabulary's), in place of the plain one; h is [B*T, d]. Rows move by device-to-device
// copies and the ids are already on the device, so a CUDA graph can capture this.
void exclude_at_last(const Tensor& h, const Tensor& W, int64_t vocab_chunk,
                     const ArgmaxExclusion& excluded, Tensor& predictions) {
  if (excluded.empty()) return;
  const int64_t B = predictions.size(0), T = predictions.size(1), d = h.size(1);
  if (T == 1) {  // every row is a last position
    predictions = lm_head_argmax(h, W, vocab_chunk, excluded).view({B, 1});
    return;
  }
  Tensor last = Tensor::empty({B, d}, h.dtype(), h.device());
  for (int64_t b = 0; b < B; ++b)
    last.slice_flat(b * d, {1, d}).copy_from(h.slice_flat((b * T + T - 1) * d, {1, d}));
  Tensor next = lm_head_argmax(last, W, vocab_chunk, excluded);
  for (int64_t b = 0; b < B; ++b)
    predictions.slice_flat(b * T + T - 1, {1}).copy_from(next.slice_flat(b, {1}));
}

}  // namespace

StepOutput LanguageModel::forward(const Batch& batch, bool training) {
  const char* op = "LanguageModel::forward";
  check_dtype(op, "tokens", batch.tokens, DType::I32);
  check_dim(op, "tokens", batch.tokens, 2);
  check_shape(op, "targets", batch.targets, batch.tokens.shape());
  check_dtype(op, "targets", batch.targets, DType::I32);
  if (batch.sample_ids.defined()) {
    check_dtype(op, "sample_ids", batch.sample_ids, DType::I64);
    check_shape(op, "sample_ids", batch.sample_ids, {batch.tokens.size(0)});
  }
  int64_t B = batch.tokens.size(0), T = batch.tokens.size(1), d = cfg_.d_model;
  tokens_ = batch.tokens;
  targets_ = batch.targets;
  StepOutput out;
  profile::Section whole("model forward (other: fsdp gathers, norms, ...)");
  gather(embed_->unit);  // held to the end of backward: the LM head and AMOR's gates use it
  Tensor h;
  {
    profile::Section s("embedding forward");
    h = embedding_forward(batch.tokens, embed_->value);  // [B,T,d]
  }
  h_final_ = body_forward(h, batch, training, out);
  profile::Section s("lm head + loss forward");
  LmHeadLossOut head = lm_head_loss_forward(h_final_.view({B * T, d}), embed_->value,
                                            batch.targets.view({B * T}), cfg_.vocab_chunk);
  lse_ = head.lse;
  out.token_loss = head.loss.view({B, T});
  out.entropy = head.entropy.view({B, T});
  if (!training)  // evaluation scores recall and decodes greedily
    out.predictions = lm_head_argmax(h_final_.view({B * T, d}), embed_->value, cfg_.vocab_chunk).view({B, T});
  count_loss(batch.targets, head.loss, out);
  forward_done(out);
  return out;
}

void LanguageModel::backward(const Tensor& dloss) {
  int64_t B = tokens_.size(0), T = tokens_.size(1), d = cfg_.d_model;
  check_shape("LanguageModel::backward", "dloss", dloss, {B, T});
  profile::Section whole("model backward (other: fsdp, grad accumulation, ...)");
  LmHeadLossGrads g;
  {
    profile::Section s("lm head + loss backward");
    g = lm_head_loss_backward(h_final_.view({B * T, d}), embed_->value, targets_.view({B * T}), lse_,
                              dloss.view({B * T}), cfg_.vocab_chunk);
    accumulate(embed_, g.dW);
  }
  Tensor dh = body_backward(g.dh.view({B, T, d}));
  {
    profile::Section s("embedding backward");
    accumulate(embed_, embedding_backward(tokens_, dh, cfg_.vocab));
  }
  grad_ready(embed_->unit);
  release(embed_->unit);
  h_final_ = lse_ = Tensor();
}

Tensor LanguageModel::layers_forward(std::vector<std::unique_ptr<Layer>>& layers,
                                     const std::vector<int>& units, Tensor h, const MixerContext& ctx) {
  for (size_t i = 0; i < layers.size(); ++i) {
    gather(units[i]);
    h = layers[i]->forward(h, ctx);
    release(units[i]);
  }
  return h;
}

Tensor LanguageModel::layers_backward(std::vector<std::unique_ptr<Layer>>& layers,
                                      const std::vector<int>& units, Tensor dh) {
  for (size_t i = layers.size(); i-- > 0;) {
    gather(units[i]);
    dh = layers[i]->backward(dh);
    grad_ready(units[i]);
    release(units[i]);
  }
  return dh;
}

Tensor LanguageModel::layers_infer(std::vector<std::unique_ptr<Layer>>& layers,
                                  const std::vector<int>& units, Tensor h, const MixerContext& ctx,
                                  std::vector<std::unique_ptr<MixerCache>>& caches) {
  AMOR_CHECK(caches.size() == layers.size(), "LanguageModel::infer: {} layer caches for {} layers",
             caches.size(), layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    gather(units[i]);
    h = layers[i]->infer(h, ctx, *caches[i]);
    release(units[i]);
  }
  return h;
}

void LanguageModel::use_entropy_router(const std::string& path) {
  throw Error(fmt::format("eval.router '{}': model.kind '{}' has no entropy gates to route (only {})",
                          path, cfg_.kind, "amor"));
}

std::unique_ptr<InferenceState> LanguageModel::new_body_state() const {
  throw Error(fmt::format("LanguageModel: model.kind '{}' has no inference path", cfg_.kind));
}

Tensor LanguageModel::body_infer(const Tensor&, InferenceState&, StepOutput&) {
  throw Error(fmt::format("LanguageModel: model.kind '{}' has no inference path", cfg_.kind));
}

bool InferenceState::uniform() const {
  return std::all_of(lengths.begin(), lengths.end(), [&](int64_t n) { return n == lengths.front(); }) &&
         std::all_of(prefill_lens.begin(), prefill_lens.end(), [&](int64_t n) { return n == prefill_lens.front(); });
}

int64_t InferenceState::length() const {
  AMOR_CHECK(!lengths.empty() && uniform(),
             "InferenceState: its {} sequences stand at different positions (a joined state); ask "
             "each sequence's lengths[b]", batch);
  return lengths.front();
}

void InferenceState::advance(int64_t T) {
  for (int64_t& n : lengths) n += T;
}

void InferenceState::add_prefill(int64_t T) {
  for (int64_t& n : prefill_lens) n += T;
}

void InferenceState::append_rows(InferenceState& other) {
  AMOR_CHECK(typeid(*this) == typeid(other),
             "InferenceState::append_rows: the states were made by different model kinds");
  append_body_rows(other);
  batch += other.batch;
  lengths.insert(lengths.end(), other.lengths.begin(), other.lengths.end());
  prefill_lens.insert(prefill_lens.end(), other.prefill_lens.begin(), other.prefill_lens.end());
  other.batch = 0;
  other.lengths.clear();
  other.prefill_lens.clear();
}

std::unique_ptr<InferenceState> LanguageModel::new_inference_state(int64_t batch) const {
  AMOR_CHECK(batch >= 1, "LanguageModel::new_inference_state: batch {} must be >= 1", batch);
  std::unique_ptr<InferenceState> s = new_body_state();
  s->batch = batch;
  s->lengths.assign(static_cast<size_t>(batch), 0);
  s->prefill_lens.assign(static_cast<size_t>(batch), 0);
  return s;
}

std::unique_ptr<InferenceState> LanguageModel::join_inference_states(
    std::vector<std::unique_ptr<InferenceState>> parts) const {
  AMOR_CHECK(!parts.empty(), "LanguageModel::join_inference_states: no states to join");
  std::unique_ptr<InferenceState> joined = std::move(parts.front());
  AMOR_CHECK(joined != nullptr, "LanguageModel::join_inference_states: state 0 is null");
  for (size_t i = 1; i < parts.size(); ++i) {
    AMOR_CHECK(parts[i] != nullptr, "LanguageModel::join_inference_states: state {} is null", i);
    joined->append_rows(*parts[i]);
  }
  return joined;
}

StepOutput LanguageModel::infer(const Tensor& tokens, const Tensor& targets, InferenceState& state,
                                 std::span<const int32_t> exclude_next) {
  const char* op = "LanguageModel::infer";
  check_dtype(op, "tokens", tokens, DType::I32);
  check_dim(op, "tokens", tokens, 2);
  const int64_t B = tokens.size(0), T = tokens.size(1), d = cfg_.d_model;
  AMOR_CHECK(B == state.batch, "{}: tokens {} for an inference state of {} sequences", op,
             tokens.str(), state.batch);
  AMOR_CHECK(T >= 1, "{}: tokens {} holds no new token", op, tokens.str());
  Tensor tg = targets;
  if (tg.defined()) {
    check_dtype(op, "targets", tg, DType::I32);
    check_shape(op, "targets", tg, tokens.shape());
  }
  // Checked (and uploaded) before any cache advances: a bad id leaves the state as it was.
  const ArgmaxExclusion excluded = exclusion_for(exclude_next);
  // Token ids may come from the host (generation feeds back what it decoded): the model's device.
  const Device dev = embed_->value.device();
  if (!tg.defined()) {
    StepOutput out = infer_on_device(tokens.to(dev), state, excluded);
    state.advance(T);
    return out;
  }
  StepOutput out;
  gather(embed_->unit);
  tg = tg.to(dev);
  Tensor h = body_infer(embedding_forward(tokens.to(dev), embed_->value), state, out).view({B * T, d});
  const int64_t chunk = inference_vocab_chunk(B * T, cfg_.vocab, cfg_.vocab_chunk);
  LmHeadLossOut head = lm_head_loss_forward(h, embed_->value, tg.view({B * T}), chunk);
  out.token_loss = head.loss.view({B, T});
  out.entropy = head.entropy.view({B, T});
  out.predictions = lm_head_argmax(h, embed_->value, chunk).view({B, T});
  exclude_at_last(h, embed_->value, chunk, excluded, out.predictions);
  release(embed_->unit);
  count_loss(tg, head.loss, out);
  state.advance(T);
  return out;
}

StepOutput LanguageModel::infer_on_device(const Tensor& tokens, InferenceState& state,
                                          const ArgmaxExclusion& exclude_next) {
  const int64_t B = tokens.size(0), T = tokens.size(1), d = cfg_.d_model;
  StepOutput out;
  gather(embed_->unit);
  Tensor h = body_infer(embedding_forward(tokens, embed_->value), state, out).view({B * T, d});
  // Entropy and greedy prediction in one pass over the vocabulary, no targets read back; no
  // target means no loss: token_loss is zeros, n_valid and loss_sum 0 (count_loss's result).
  const int64_t chunk = inference_vocab_chunk(B * T, cfg_.vocab, cfg_.vocab_chunk);
  LmHeadDecodeOut head = lm_head_decode(h, embed_->value, chunk);
  out.entropy = head.entropy.view({B, T});
  out.predictions = head.argmax.view({B, T});
  out.token_loss = Tensor::zeros({B, T}, head.entropy.dtype(), head.entropy.device());
  exclude_at_last(h, embed_->value, chunk, exclude_next, out.predictions);
  release(embed_->unit);
  return out;
}

ArgmaxExclusion LanguageModel::exclusion_for(std::span<const int32_t> exclude_next) const {
  if (exclude_next.empty()) return ArgmaxExclusion();
  return ArgmaxExclusion(exclude_next, embed_->value.size(0), embed_->value.device());
}

void LanguageModel::replayed_step(InferenceState& state, int64_t T) {
  std::vector<KvCache*> caches;
  state.kv_caches(caches);
  for (KvCache* c : caches) c->replayed(T);
  state.advance(T);
}

std::vector<uintptr_t> InferenceState::graph_signature() {
  std::vector<KvCache*> caches;
  kv_caches(caches);
  std::vector<uintptr_t> sig;
  for (const KvCache* c : caches) c->graph_signature(sig);
  return sig;
}

bool InferenceState::kv_room(int64_t T) {
  std::vector<KvCache*> caches;
  kv_caches(caches);
  return std::all_of(caches.begin(), caches.end(), [&](const KvCache* c) { return c->has_room(T); });
}

std::string LanguageModel::decode_graph_blocker() const {
  if (embed_->value.is_cpu()) return "the model is on the cpu (CUDA graphs need the GPU)";
  if (hooks_) return "unit hooks are set (parallel gathers around each unit)";
  return body_graph_blocker();
}

std::string LanguageModel::body_graph_blocker() const {
  return fmt::format("model.kind '{}' has no capturable decode step", cfg_.kind);
}

void StepOutput::to_host() {
  auto host = [](Tensor& t) {
    if (t.defined() && !t.is_cpu()) t = t.to(Device::CPU);
  };
  for (Tensor* t : {&token_loss, &entropy, &modes, &predictions}) host(*t);
  for (auto& g : gates) host(g);
  for (auto& g : gate_entropy) host(g);
}

bool StackModel::takes_modes() const { return kind_traits(cfg_.kind).takes_modes; }

std::string layer_pattern(const ModelConfig& cfg) {
  auto repeat = [&](const std::string& p) {
    AMOR_CHECK(!p.empty(), "model.pattern: empty layer pattern for kind 'serial'");
    for (char c : p)
      AMOR_CHECK(c == 'A' || c == 'M' || c == 'G',
                 "model.pattern: '{}' has the letter '{}'; use A (attention), M (Mamba2), G (GDN)", p, c);
    AMOR_CHECK(cfg.n_layers % static_cast<int64_t>(p.size()) == 0,
               "model.pattern: n_layers {} is not a multiple of the pattern '{}' ({} layers)",
               cfg.n_layers, p, p.size());
    std::string s;
    while (static_cast<int64_t>(s.size()) < cfg.n_layers) s += p;
    return s;
  };
  if (cfg.kind == "transformer") return std::string(static_cast<size_t>(cfg.n_layers), 'A');
  if (cfg.kind == "mamba2") return std::string(static_cast<size_t>(cfg.n_layers), 'M');
  if (cfg.kind == "gdn") return std::string(static_cast<size_t>(cfg.n_layers), 'G');
  if (cfg.kind == "serial") return repeat(cfg.pattern);
  if (cfg.kind == "oryx") return std::string(static_cast<size_t>(cfg.n_layers), 'O');
  if (cfg.kind == "fused") return std::string(static_cast<size_t>(cfg.n_layers), 'F');
  throw Error(fmt::format("model.kind: '{}' is not a stack model", cfg.kind));
}

StackModel::StackModel(const ModelConfig& cfg, DType dtype) : LanguageModel(cfg, dtype) {
  std::string pattern = layer_pattern(cfg);
  for (size_t i = 0; i < pattern.size(); ++i) {
    std::string prefix = "layers." + std::to_string(i);
    layer_units_.push_back(params_.begin_unit(prefix));
    layers_.push_back(std::make_unique<Layer>(params_, prefix, cfg,
                                              make_mixer(pattern[i], params_, prefix + ".mixer", cfg)));
  }
  norm_f_unit_ = params_.begin_unit("norm_f");
  norm_f_ = std::make_unique<RMSNorm>(params_, "norm_f", cfg.d_model, norm_eps_of(cfg).norm_f);
}

Tensor StackModel::body_forward(const Tensor& h0, const Batch& batch, bool training, StepOutput& out) {
  MixerContext ctx;
  ctx.training = training;
  if (cfg_.kind == "oryx") {
    int64_t B = h0.size(0), T = h0.size(1);
    if (training) {
      // One RNG per sequence, seeded by (mode seed, sample id): see Batch::sample_ids.
      ctx.modes = Tensor::empty({B, T}, DType::U8);
      for (int64_t b = 0; b < B; ++b) {
        int64_t id = batch.sample_ids.defined() ? static_cast<int64_t>(batch.sample_ids.item(b))
                                                : next_sample_id_ + b;
        std::seed_seq seq{static_cast<uint32_t>(mode_seed_), static_cast<uint32_t>(mode_seed_ >> 32),
                          static_cast<uint32_t>(id), static_cast<uint32_t>(static_cast<uint64_t>(id) >> 32)};
        std::mt19937_64 rng(seq);
        Tensor row = oryx_training_modes(cfg_.oryx, 1, T, rng);
        std::copy(row.data<uint8_t>(), row.data<uint8_t>() + T, ctx.modes.data<uint8_t>() + b * T);
      }
      if (!batch.sample_ids.defined()) next_sample_id_ += B;
    } else if (batch.modes.defined()) {
      check_dtype("StackModel::forward", "Batch::modes", batch.modes, DType::U8);
      check_shape("StackModel::forward", "Batch::modes", batch.modes, {B, T});
      ctx.modes = batch.modes;
    } else {
      // A scoring forward is all context: "prefill" covers the whole sequence.
      ctx.modes = oryx_inference_modes(cfg_.oryx, B, T, /*prefill_len=*/T);
    }
    out.modes = ctx.modes;
  }
  Tensor h = layers_forward(layers_, layer_units_, h0, ctx);
  gather(norm_f_unit_);
  h = norm_f_->forward(h);
  release(norm_f_unit_);
  return h;
}

Tensor StackModel::body_backward(const Tensor& dy) {
  gather(norm_f_unit_);
  Tensor dh = norm_f_->backward(dy);
  grad_ready(norm_f_unit_);
  release(norm_f_unit_);
  return layers_backward(layers_, layer_units_, dh);
}

std::unique_ptr<InferenceState> StackModel::new_body_state() const {
  auto s = std::make_unique<StackInferenceState>();
  for (const auto& l : layers_) s->layers.push_back(l->new_cache());
  return s;
}

Tensor StackModel::body_infer(const Tensor& h0, InferenceState& state, StepOutput& out) {
  auto* s = dynamic_cast<StackInferenceState*>(&state);
  AMOR_CHECK(s != nullptr, "StackModel::infer: the inference state was made by another model kind");
  MixerContext ctx;
  ctx.training = false;
  if (cfg_.kind == "oryx") {
    const int64_t B = h0.size(0), T = h0.size(1);
    if (state.uniform()) {
      ctx.modes = oryx_inference_modes_at(cfg_.oryx, B, state.lengths.front(), T, state.prefill_lens.front());
    } else {  // a joined state: each sequence's modes from its own position and prefill
      ctx.modes = Tensor::empty({B, T}, DType::U8);
      for (int64_t b = 0; b < B; ++b) {
        Tensor row = oryx_inference_modes_at(cfg_.oryx, 1, state.lengths[static_cast<size_t>(b)], T,
                                             state.prefill_lens[static_cast<size_t>(b)]);
        std::copy(row.data<uint8_t>(), row.data<uint8_t>() + T, ctx.modes.data<uint8_t>() + b * T);
      }
    }
    out.modes = ctx.modes;
  }
  Tensor h = layers_infer(layers_, layer_units_, h0, ctx, s->layers);
  gather(norm_f_unit_);
  h = norm_f_->apply(h);
  release(norm_f_unit_);
  return h;
}

// A step of M, G, A and F layers (and the norms, MLPs, embedding and LM head) keeps every shape
// and address from step to step: the recurrent states are updated in place, and attention (A,
// and F's attention half) runs on its KV cache's step path, whose kernels read the cache's
// lengths on the device and whose storage stays put while it has room (kv_cache.h; the session
// runs a step that would outgrow it eagerly and captures anew). Oryx layers are not capturable:
// each step computes its tokens' modes on the host, copies them to the device and chooses on the
// host which of its paths run.
std::string StackModel::body_graph_blocker() const {
  const std::string pattern = layer_pattern(cfg_);
  for (char c : pattern) {
    if ((c == 'A' || c == 'F') && !KvCache::step_path_on_gpu()) return kv_step_path_off_blocker(cfg_.kind);
    if (c == 'M' || c == 'G' || c == 'A' || c == 'F') continue;
    return fmt::format("model.kind '{}' (layer '{}') decides per step on the host (Oryx: each "
                       "token's mode is computed on the host and copied to the device, and the "
                       "host chooses which paths run)", cfg_.kind, std::string(1, c));
  }
  return "";
}

std::unique_ptr<LanguageModel> build_model(const ModelConfig& cfg, DType dtype) {
  if (cfg.kind == "transformer" || cfg.kind == "mamba2" || cfg.kind == "gdn" || cfg.kind == "serial" ||
      cfg.kind == "oryx" || cfg.kind == "fused")
    return std::make_unique<StackModel>(cfg, dtype);
  if (cfg.kind == "amor") return std::make_unique<AmorModel>(cfg, dtype);
  throw Error(fmt::format(
      "model.kind: unknown kind '{}' (transformer, mamba2, gdn, serial, fused, amor, oryx)", cfg.kind));
}

}  // namespace amor::model
