// Finite-difference gradient checks in double.
//
// The op under test computes outputs y_k = f_k(x_1..x_n). We fix random weights w_k of the same
// shapes and check the analytic gradient of L = sum_k <w_k, y_k> (what the op's backward returns
// when handed dy_k = w_k) against central differences
//     dL/dx[i] ~ (L(x + h e_i) - L(x - h e_i)) / 2h,   h = 1e-6,
// for every element of every input (or a deterministic sample of max_elements_per_input when an
// input is large). In double the truncation and rounding errors of this estimate are around
// 1e-9 relative, so the default tolerance 1e-6 catches any real mistake and never a rounding one.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kernels/core/tensor.h"

namespace amor::testing {

struct GradInput {
  std::string name;
  Tensor value;     // F64 CPU tensor; perturbed in place (and restored) during the check
  Tensor analytic;  // F64 CPU tensor of the same shape: the backward's dL/dvalue
};

struct GradcheckOptions {
  double step = 1e-6;
  double tolerance = 1e-6;            // on max|num - ana| / max(max|num|, max|ana|, floor)
  double floor = 1e-3;                // magnitudes below this compare absolutely
  int64_t max_elements_per_input = 4096;
};

// The result for one input: the worst scaled error and where it occurred.
struct GradcheckReport {
  std::string name;
  double error = 0;
  int64_t worst_index = -1;
  double numeric = 0, analytic = 0;
};

// forward() recomputes all outputs from the current values of the inputs.
// Returns one report per input; ADD_FAILURE()s (gtest) for each input over tolerance.
std::vector<GradcheckReport> gradcheck(const std::function<std::vector<Tensor>()>& forward,
                                       const std::vector<Tensor>& out_weights,
                                       const std::vector<GradInput>& inputs,
                                       const GradcheckOptions& options = {});

// L = sum_k <w_k, y_k> in double.
double weighted_sum(const std::vector<Tensor>& outputs, const std::vector<Tensor>& weights);

// rms(a - b) / rms(b) (absolute rms(a) when b is all zero); any NaN gives +inf.
double rel_rms(const Tensor& a, const Tensor& b);
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace amor::testing
