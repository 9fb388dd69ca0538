// A sequence mixer (attention, Mamba2, Gated DeltaNet, Oryx's multi-mixer, fused pairs): maps the
// normed input [B,T,d] to [B,T,d]; backward maps the output gradient to the input gradient and
// accumulates its parameters' gradients. drop_saved() frees what forward kept for backward (the
// pre-norm layer calls it under activation recomputation and re-runs forward before backward).
//
// Inference (models/README.md "Inference"): new_cache() gives an empty cache of the mixer's own
// type (KV cache, conv and scan states); infer(x, ctx, cache) runs the mixer over the next T
// tokens x [B,T,d] of B sequences, each continuing from what the cache has seen of it, and
// advances the cache by T. T == 1 uses the decode-step kernels, T > 1 the chunked scans from the cache's
// states; both equal forward() over the whole sequence up to rounding. Nothing is saved for
// backward and the training state (saved tensors) is not touched.
#pragma once
#include <memory>
#include <vector>

#include "kernels/core/tensor.h"

namespace amor::model {

class KvCache;  // models/infer/kv_cache.h

struct MixerContext {
  bool training = true;
  Tensor query_gate;  // AMOR: u8 [B,T], attention runs only at rows with 1 (undefined = all)
  Tensor modes;       // Oryx: u8 [B,T], 1 = attention, 0 = linear mixer
};

// A mixer's inference state for B sequences. The sequences need not stand at the same position:
// recurrent states do not depend on it, and a KV cache keeps each sequence's length (positions
// for RoPE come from it; kv_cache.h).
struct MixerCache {
  virtual ~MixerCache() = default;
  // other's sequences join this cache after its own (greedy_generate decodes prompts of
  // different lengths together after prefilling them apart). other was made by the same mixer
  // and is left empty.
  virtual void append_rows(MixerCache& other) = 0;
  // Every sequence will hold at most `tokens` tokens: a KV cache sizes its storage once (kv_cache.h);
  // recurrent states have nothing to size.
  virtual void reserve_tokens(int64_t /*tokens*/) {}
  // The KV caches in this cache (appended to `out`; recurrent states have none): what a CUDA
  // graph of a decode step reads at fixed addresses, and whose host lengths advance after a
  // replay (LanguageModel::replayed_step).
  virtual void kv_caches(std::vector<KvCache*>& /*out*/) {}
};

class Mixer {
 public:
  virtual ~Mixer() = default;
  virtual Tensor forward(const Tensor& x, const MixerContext& ctx) = 0;
  virtual Tensor backward(const Tensor& dy) = 0;
  // Releases every tensor saved by the last forward (its own and its submodules'); a backward
  // then needs a new forward first. Backward calls it when done.
  virtual void drop_saved() = 0;

  virtual std::unique_ptr<MixerCache> new_cache() const = 0;
  virtual Tensor infer(const Tensor& x, const MixerContext& ctx, MixerCache& cache) = 0;
};

// The cache as the mixer's own type (an amor::Error naming the mixer if it is another's).
template <class C>
C& cache_as(MixerCache& cache, const char* mixer) {
  C* c = dynamic_cast<C*>(&cache);
  AMOR_CHECK(c != nullptr, "{}::infer: the cache was made by another kind of mixer", mixer);
  return *c;
}

}  // namespace amor::model
