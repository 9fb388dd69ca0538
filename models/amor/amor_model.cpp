#include "models/amor/amor_model.h"

#include "data/json/json.h"
#include "kernels/core/error.h"
#include "kernels/core/profile.h"
#include "kernels/elementwise/elementwise.h"
#include "models/core/norm_eps.h"
#include "models/infer/kv_cache.h"

namespace amor::model {

char amor_backbone_letter(const ModelConfig& cfg) {
  const std::string& b = cfg.amor.backbone;
  if (b == "gdn") return 'G';
  if (b == "mamba2") return 'M';
  if (b == "transformer") return 'A';
  throw Error(fmt::format(
      "model.amor.backbone: '{}' is not one of gdn, mamba2 (or transformer, a debug backbone)", b));
}

namespace {

// Checks the model-level keys before anything is built (the gate checks its own).
void check_config(const ModelConfig& cfg) {
  amor_backbone_letter(cfg);
  AMOR_CHECK(cfg.amor.blocks == 1 || cfg.amor.blocks == 3,
             "model.amor.blocks: {} AMOR blocks; the paper's variants have 1 or 3", cfg.amor.blocks);
  AMOR_CHECK(cfg.amor.residual_mode == "classic" || cfg.amor.residual_mode == "h",
             "model.amor.residual_mode: '{}' is not one of classic, h", cfg.amor.residual_mode);
}

}  // namespace

AmorModel::AmorModel(const ModelConfig& cfg, DType dtype) : LanguageModel(cfg, dtype) {
  check_config(cfg);
  classic_ = cfg.amor.residual_mode == "classic";
  char letter = amor_backbone_letter(cfg);
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    std::string prefix = "layers." + std::to_string(i);
    layer_units_.push_back(params_.begin_unit(prefix));
    layers_.push_back(std::make_unique<Layer>(params_, prefix, cfg,
                                              make_mixer(letter, params_, prefix + ".mixer", cfg)));
  }
  norm_f_unit_ = params_.begin_unit("norm_f");
  const NormEps eps = norm_eps_of(cfg);
  norm_f_ = std::make_unique<RMSNorm>(params_, "norm_f", cfg.d_model, eps.norm_f);
  for (int64_t i = 0; i < cfg.amor.blocks; ++i) {
    std::string prefix = "amor." + std::to_string(i);
    block_units_.push_back(params_.begin_unit(prefix));
    block_norms_.push_back(i == 0 ? nullptr
                                  : std::make_unique<RMSNorm>(params_, prefix + ".norm",
                                                              cfg.d_model, eps.amor));
    blocks_.push_back(std::make_unique<AmorBlock>(params_, prefix, cfg));
  }
  final_norm_unit_ = params_.begin_unit("final_norm");
  final_norm_ = std::make_unique<RMSNorm>(params_, "final_norm", cfg.d_model, eps.amor);
}

std::vector<AmorGateState> AmorModel::gate_state() const {
  std::vector<AmorGateState> s;
  for (auto& b : blocks_) s.push_back(b->gate().state());
  return s;
}

void AmorModel::set_gate_state(const std::vector<AmorGateState>& state) {
  AMOR_CHECK(state.size() == blocks_.size(),
             "AmorModel::set_gate_state: {} gate states for a model with {} AMOR blocks",
             state.size(), blocks_.size());
  for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i]->gate().set_state(state[i]);
}

void AmorModel::set_entropy_gather(const EntropyGather& gather) {
  for (auto& b : blocks_) b->gate().set_gather(gather);
}

namespace {
constexpr const char* kGatesKey = "amor_gates";  // the checkpoint metadata's name since format 1
}  // namespace

std::map<std::string, std::string> AmorModel::checkpoint_state() const {
  return {{kGatesKey, gate_state_to_json(gate_state())}};
}

void AmorModel::restore_checkpoint_state(const std::map<std::string, std::string>& saved, bool required) {
  auto it = saved.find(kGatesKey);
  if (it == saved.end()) {
    AMOR_CHECK(!required, "checkpoint: the metadata has no '{}' (the AMOR gates' thresholds)", kGatesKey);
    return;
  }
  set_gate_state(gate_state_from_json(it->second));
}

void AmorModel::set_run_group(RunGroup* group) {
  if (!group) return set_entropy_gather(EntropyGather{});
  set_entropy_gather([group](const Tensor& local) { return group->gather_flat(local); });
}

std::string gate_state_to_json(const std::vector<AmorGateState>& s) {
  json::Array a;
  for (const auto& g : s) a.emplace_back(json::Object{{"m", json::Value(g.m)}, {"s", json::Value(g.s)}});
  return json::Value(std::move(a)).dump();
}

std::vector<AmorGateState> gate_state_from_json(const std::string& text) {
  std::vector<AmorGateState> out;
  // The parsed document must outlive the loop (a range-for over a temporary's member dangles).
  const json::Value doc = json::parse(text, "checkpoint amor_gates");
  for (const auto& v : doc.as_array("amor_gates")) {
    AmorGateState g;
    g.m = v.at("m").as_double("amor_gates m");
    g.s = v.at("s").as_double("amor_gates s");
    out.push_back(g);
  }
  return out;
}

void AmorModel::set_sparse_inference(bool on) {
  for (auto& b : blocks_) b->set_sparse_inference(on);
}

bool AmorModel::sparse_inference() const { return blocks_.empty() || blocks_[0]->sparse_inference(); }

void AmorModel::set_entropy_router(std::shared_ptr<const EntropyRouter> router) {
  if (router) {
    AMOR_CHECK(static_cast<int64_t>(router->blocks.size()) == num_blocks() && router->d() == cfg_.d_model,
               "entropy router: it has {} blocks of width {}, the model {} AMOR blocks of width {} "
               "(model.amor.blocks, model.d_model)",
               router->blocks.size(), router->d(), num_blocks(), cfg_.d_model);
  }
  for (size_t k = 0; k < blocks_.size(); ++k) blocks_[k]->set_entropy_router(router, static_cast<int64_t>(k));
}

void AmorModel::use_entropy_router(const std::string& path) {
  set_entropy_router(std::make_shared<const EntropyRouter>(load_entropy_router(path)));
}

Tensor AmorModel::body_forward(const Tensor& h0, const Batch&, bool training, StepOutput& out) {
  MixerContext ctx;
  ctx.training = training;
  Tensor h = layers_forward(layers_, layer_units_, h0, ctx);
  gather(norm_f_unit_);  // classic: the stream's norm; h mode: block 0's pre-norm
  if (classic_) h = norm_f_->forward(h);
  const Tensor& W = embedding()->value;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    gather(block_units_[i]);
    Tensor hn = i > 0 ? block_norms_[i]->forward(h) : classic_ ? h : norm_f_->forward(h);
    Tensor delta;
    {
      profile::Section s("amor block forward (gate, gated attention)");
      delta = blocks_[i]->forward(hn, W, training);
    }
    // classic block 0: h is hn (the norm_f'd stream) and becomes out = hn + delta.
    h = add(h, delta);
    out.gates.push_back(blocks_[i]->last_gate());
    out.gate_entropy.push_back(blocks_[i]->last_entropy());
    if (observer_) observer_(static_cast<int64_t>(i), hn, blocks_[i]->last_entropy());
    release(block_units_[i]);
    if (i == 0) release(norm_f_unit_);
  }
  gather(final_norm_unit_);
  h = final_norm_->forward(h);
  release(final_norm_unit_);
  return h;
}

// StepOutput.tau, the threshold each block used: logged per step (run.h5's tau and block_tau).
// Reading each block's device state in the forward would stop the host K times per forward while
// the GPU still works; here the forward's losses were just copied back, so the stream is idle and
// one copy of K doubles (gathered on the device first) costs no wait. (Reading only at the steps
// the trainer logs would need StepOutput to carry device tensors; the trainer logs every step.)
void AmorModel::forward_done(StepOutput& out) {
  if (blocks_.empty()) return;
  const int64_t K = num_blocks();
  Tensor taus = Tensor::empty({K}, DType::F64, blocks_[0]->last_gate_state().device());
  for (int64_t k = 0; k < K; ++k)
    taus.slice_flat(k, {1}).copy_from(blocks_[static_cast<size_t>(k)]->last_gate_state().slice_flat(ref::kGateTau, {1}));
  out.tau = taus.to(Device::CPU).to_vector<double>();
}

namespace {
// The backbone layers' caches and each block's KV cache.
struct AmorInferenceState final : InferenceState {
  std::vector<std::unique_ptr<MixerCache>> layers;
  std::vector<KvCache> blocks;

  void reserve_tokens(int64_t tokens) override {
    for (auto& l : layers) l->reserve_tokens(tokens);
    for (KvCache& b : blocks) b.reserve_tokens(tokens);
  }
  void kv_caches(std::vector<KvCache*>& out) override {
    for (auto& l : layers) l->kv_caches(out);
    for (KvCache& b : blocks) out.push_back(&b);
  }

 protected:
  void append_body_rows(InferenceState& other) override {
    auto& o = static_cast<AmorInferenceState&>(other);  // the same type: append_rows checked it
    AMOR_CHECK(o.layers.size() == layers.size() && o.blocks.size() == blocks.size(),
               "AmorInferenceState: joining states of different models");
    for (size_t i = 0; i < layers.size(); ++i) layers[i]->append_rows(*o.layers[i]);
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i].append_rows(o.blocks[i]);
  }
};
}  // namespace

std::unique_ptr<InferenceState> AmorModel::new_body_state() const {
  auto s = std::make_unique<AmorInferenceState>();
  for (const auto& l : layers_) s->layers.push_back(l->new_cache());
  s->blocks.resize(blocks_.size());
  return s;
}

// body_forward's structure, each part over its cache.
Tensor AmorModel::body_infer(const Tensor& h0, InferenceState& state, StepOutput& out) {
  auto* s = dynamic_cast<AmorInferenceState*>(&state);
  AMOR_CHECK(s != nullptr, "AmorModel::infer: the inference state was made by another model kind");
  MixerContext ctx;
  ctx.training = false;
  Tensor h = layers_infer(layers_, layer_units_, h0, ctx, s->layers);
  gather(norm_f_unit_);
  if (classic_) h = norm_f_->apply(h);
  const Tensor& W = embedding()->value;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    gather(block_units_[i]);
    Tensor hn = i > 0 ? block_norms_[i]->apply(h) : classic_ ? h : norm_f_->apply(h);
    AmorBlock::InferOut r = blocks_[i]->infer(hn, W, s->blocks[i], h);
    h = r.h;
    out.gates.push_back(r.gate);
    out.gate_entropy.push_back(r.entropy);
    out.tau.push_back(r.tau);
    if (observer_) observer_(static_cast<int64_t>(i), hn, r.entropy);
    release(block_units_[i]);
    if (i == 0) release(norm_f_unit_);
  }
  gather(final_norm_unit_);
  h = final_norm_->apply(h);
  release(final_norm_unit_);
  return h;
}

// Capturable (decode_graph.h) in the dense inference form only: the backbone's recurrent steps,
// and per block the gate's entropy head, the frozen gate (its state uploaded at the first step),
// K and V appended to the block's KV cache and Q, the gated attention and O at every row, all on
// the KV cache's step path (lengths on the device: kv_cache.h), alpha kept from the first step
// (AmorBlock::inference_alpha). Not capturable: the sparse form (the default) reads each block's
// firing rows back to the host every step (they decide the kernels' shapes); a block observer is
// host code that a replay would skip. With a fitted entropy router the gate's input is the
// router's prediction, whose parameters and column of ones stay on the device (EntropyRouter).
std::string AmorModel::body_graph_blocker() const {
  if (sparse_inference())
    return "model.kind 'amor' in its sparse inference form: each block reads its firing rows back "
           "to the host every step (data-dependent shapes); the dense form "
           "(AMOR_BLOCK_INFERENCE=dense, set_sparse_inference(false)) can be captured";
  if (observer_) return "model.kind 'amor' with a block observer: host code that a replay would skip";
  if (!KvCache::step_path_on_gpu()) return kv_step_path_off_blocker(cfg_.kind);
  return "";
}

Tensor AmorModel::body_backward(const Tensor& dy) {
  gather(final_norm_unit_);
  Tensor dh = final_norm_->backward(dy);
  grad_ready(final_norm_unit_);
  release(final_norm_unit_);
  for (size_t i = blocks_.size(); i-- > 0;) {
    gather(block_units_[i]);
    if (i == 0) gather(norm_f_unit_);
    // h_next = h + delta_i(hn_i): the identity path plus the block's path back through its norm.
    Tensor dhn;
    {
      profile::Section s("amor block backward");
      dhn = blocks_[i]->backward(dh);
    }
    if (i > 0)
      add_(dh, block_norms_[i]->backward(dhn));
    else if (classic_)
      add_(dh, dhn);  // hn = h
    else
      add_(dh, norm_f_->backward(dhn));
    grad_ready(block_units_[i]);
    release(block_units_[i]);
  }
  if (classic_) dh = norm_f_->backward(dh);
  grad_ready(norm_f_unit_);
  release(norm_f_unit_);
  return layers_backward(layers_, layer_units_, dh);
}

}  // namespace amor::model
