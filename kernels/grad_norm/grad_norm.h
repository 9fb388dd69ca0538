// Global gradient norm and clipping over a list of gradients (see grad_norm_ref.h), split into
// pieces so FSDP can sum the squares of its shards across ranks before taking the norm.
// Gradients are f32/f64 on the cpu and f32/bf16 on cuda (summed on the device in f64, one
// transfer back per call); a list may mix devices.
#pragma once
#include <vector>

#include "kernels/core/tensor.h"

namespace amor {

// sum of g^2 over every element of every tensor, in double (0 for an empty list).
double sum_of_squares(const std::vector<Tensor>& grads);
// sqrt(sum_of_squares(grads)).
double global_grad_norm(const std::vector<Tensor>& grads);
// min(1, max_norm / (total_norm + 1e-6)): the factor clip_grad_norm applies.
double clip_coefficient(double total_norm, double max_norm);
// g *= coef for every gradient, in place.
void scale_grads(std::vector<Tensor>& grads, double coef);
// Clips in place like torch.nn.utils.clip_grad_norm_(max_norm); returns the norm before clipping.
double clip_grad_norm(std::vector<Tensor>& grads, double max_norm);

}  // namespace amor
