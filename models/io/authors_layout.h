// The AMOR authors' checkpoints (HaoranZhengRaul/AMOR, amor.py at 005ce57: the AMOR class's
// state_dict over transformers' Mamba2 or fla's GatedDeltaNet) to and from amor-run's weights
// files (model_weights.h). The name table is authors_layout.cpp, the one place to correct it.
//
// What changes besides names: depthwise convs are [C,1,K] there ([C,K] here); the tied head
// appears there as lm_head.weight beside embed.weight (state_dict lists a shared tensor under
// both names; safetensors' save_model keeps one of them, so either alone is accepted); the
// gates' EMA buffers (amor_blocks.{k}.gate.running_threshold / running_std, scalars) are our
// AmorGateState {m, s}, kept in the weights file's metadata as "amor_gates" (the checkpoint's
// JSON). Values are moved, never converted: a round trip is bitwise (the gate buffers are written
// f64 beside f64 weights, else f32, torch's dtype for them; a bf16 buffer comes back f32, equal).
#pragma once
#include <string>
#include <vector>

#include "models/amor/amor_gate.h"
#include "models/core/config.h"
#include "models/core/param_store.h"
#include "models/io/safetensors.h"

namespace amor::model {

struct AuthorsName {
  std::string ours;
  std::string theirs;
  bool conv = false;  // theirs [C,1,K], ours [C,K]
};

// Every parameter of an amor model (model.kind amor) under both names, in amor-run's order.
// Throws for any other kind.
std::vector<AuthorsName> authors_names(const ModelConfig& cfg);
// The two gate buffers of block k, {running_threshold, running_std}.
std::pair<std::string, std::string> authors_gate_buffers(int64_t k);

struct OursWeights {
  std::vector<std::pair<std::string, Tensor>> tensors;  // ParamStore order
  std::vector<AmorGateState> gates;                     // one per block
};

// theirs: the authors' state dict. ps: a model built from the config (names and shapes). Every
// name, shape and dtype is checked first; a missing, unexpected, mis-shaped, non-float or
// other-dtype tensor, or an lm_head that is not the embedding, is an amor::Error naming each
// (`what` names the file).
OursWeights authors_to_ours(const SafetensorsFile& theirs, const ModelConfig& cfg, const ParamStore& ps,
                            const std::string& what);
// The reverse: ours (an amor-run weights file's tensors, checked against ps) and the gates.
std::vector<std::pair<std::string, Tensor>> ours_to_authors(const SafetensorsFile& ours,
                                                            const std::vector<AmorGateState>& gates,
                                                            const ModelConfig& cfg, const ParamStore& ps,
                                                            const std::string& what);

}  // namespace amor::model
