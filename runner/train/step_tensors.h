// Small tensor chores of a training or evaluation step: moving a batch to the device, reading a
// tensor back to the host (a forward's outputs: StepOutput::to_host), and the per-token loss
// weights of the global mean loss.
#pragma once
#include <cstdint>

#include "models/lm/language_model.h"

namespace amor {

// A cuda tensor's host copy (what logging and scoring read); cpu tensors as they are.
Tensor host(const Tensor& t);
// tokens and targets on the compute device; sample ids stay on the host (they seed Oryx's modes).
model::Batch on_device(model::Batch b, Device dev);
// Per-token loss weights for a micro-batch: 1/global_valid at every position with a target.
Tensor loss_weights(const Tensor& targets, double global_valid, DType dtype);
// Positions with a target.
int64_t count_valid(const Tensor& targets);

}  // namespace amor
