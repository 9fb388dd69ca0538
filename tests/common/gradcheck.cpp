#include "tests/common/gradcheck.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace amor::testing {

double weighted_sum(const std::vector<Tensor>& outputs, const std::vector<Tensor>& weights) {
  AMOR_CHECK(outputs.size() == weights.size(), "gradcheck: {} outputs but {} weights",
             outputs.size(), weights.size());
  double total = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!weights[k].defined()) continue;  // an output the loss does not read
    AMOR_CHECK(outputs[k].numel() == weights[k].numel(),
               "gradcheck: output {} is {} but its weight is {}", k, outputs[k].str(),
               weights[k].str());
    for (int64_t i = 0; i < outputs[k].numel(); ++i) total += outputs[k].item(i) * weights[k].item(i);
  }
  return total;
}

std::vector<GradcheckReport> gradcheck(const std::function<std::vector<Tensor>()>& forward,
                                       const std::vector<Tensor>& out_weights,
                                       const std::vector<GradInput>& inputs,
                                       const GradcheckOptions& opt) {
  std::vector<GradcheckReport> reports;
  for (const GradInput& in : inputs) {
    AMOR_CHECK(in.value.dtype() == DType::F64 && in.analytic.dtype() == DType::F64,
               "gradcheck: input '{}' and its gradient must be f64, got {} and {}", in.name,
               in.value.str(), in.analytic.str());
    AMOR_CHECK(in.value.numel() == in.analytic.numel(),
               "gradcheck: input '{}' is {} but its gradient is {}", in.name, in.value.str(),
               in.analytic.str());
    int64_t n = in.value.numel();
    int64_t stride = std::max<int64_t>(1, n / opt.max_elements_per_input);
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < n; i += stride) idx.push_back(i);
    if (n > 0 && idx.back() != n - 1) idx.push_back(n - 1);

    std::vector<double> num(idx.size()), ana(idx.size());
    double* v = in.value.data<double>();
    for (size_t j = 0; j < idx.size(); ++j) {
      double saved = v[idx[j]];
      v[idx[j]] = saved + opt.step;
      double lp = weighted_sum(forward(), out_weights);
      v[idx[j]] = saved - opt.step;
      double lm = weighted_sum(forward(), out_weights);
      v[idx[j]] = saved;
      num[j] = (lp - lm) / (2 * opt.step);
      ana[j] = in.analytic.item(idx[j]);
    }
    double scale = opt.floor;
    for (size_t j = 0; j < idx.size(); ++j)
      scale = std::max({scale, std::abs(num[j]), std::abs(ana[j])});
    GradcheckReport r;
    r.name = in.name;
    for (size_t j = 0; j < idx.size(); ++j) {
      double e = std::abs(num[j] - ana[j]) / scale;
      if (std::isnan(e)) e = std::numeric_limits<double>::infinity();
      if (e > r.error || r.worst_index < 0) {
        r.error = e;
        r.worst_index = idx[j];
        r.numeric = num[j];
        r.analytic = ana[j];
      }
    }
    if (r.error > opt.tolerance)
      ADD_FAILURE() << "gradient of '" << in.name << "' " << in.value.str()
                    << " disagrees with finite differences: scaled error " << r.error
                    << " at element " << r.worst_index << " (numeric " << r.numeric
                    << ", analytic " << r.analytic << ")";
    reports.push_back(r);
  }
  return reports;
}

double rel_rms(const Tensor& a, const Tensor& b) {
  AMOR_CHECK(a.numel() == b.numel(), "rel_rms: {} vs {}", a.str(), b.str());
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.item(i), y = b.item(i);
    num += (x - y) * (x - y);
    den += y * y;
  }
  double r = den > 0 ? std::sqrt(num / den) : std::sqrt(num / std::max<int64_t>(1, a.numel()));
  return std::isnan(r) ? std::numeric_limits<double>::infinity() : r;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  AMOR_CHECK(a.numel() == b.numel(), "max_abs_diff: {} vs {}", a.str(), b.str());
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double d = std::abs(a.item(i) - b.item(i));
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

}  // namespace amor::testing
