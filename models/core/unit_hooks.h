// How a parallelism wrapper (FSDP, runner/dist) sees a model run: the model announces, for each
// parameter unit (ParamStore units: the embedding, each layer or AMOR block, the norms), when it
// is about to compute with the unit's parameters and when it is done with them.
//
//   forward:  gather(u) before the unit's first use, release(u) after its last use;
//   backward: gather(u) before the unit's backward, grad_ready(u) once its gradients are complete.
// gather and release are idempotent (the embedding, tied to the LM head, stays gathered from the
// start of forward to the end of backward). With no hooks set (one rank, no sharding) nothing is
// called and the model's Params own full tensors.
#pragma once

namespace amor::model {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void gather(int unit) = 0;
  virtual void release(int unit) = 0;
  virtual void grad_ready(int unit) = 0;
};

}  // namespace amor::model
