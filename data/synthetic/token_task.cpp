// Accuracy of token predictions at labelled positions (see token_task.h).
#include "data/synthetic/token_task.h"

#include <limits>

namespace amor::synthetic {

TokenScore score_tokens(const Tensor& predictions, const Tensor& targets) {
  AMOR_CHECK(predictions.defined() && targets.defined(),
             "score_tokens: predictions and targets must both be defined");
  AMOR_CHECK(predictions.dtype() == DType::I32 && targets.dtype() == DType::I32,
             "score_tokens: predictions {} and targets {} must both be i32", predictions.str(),
             targets.str());
  AMOR_CHECK(predictions.is_cpu() && targets.is_cpu(),
             "score_tokens: predictions {} and targets {} must be on the cpu", predictions.str(),
             targets.str());
  AMOR_CHECK(targets.dim() == 2, "score_tokens: targets {} must be [n, T]", targets.str());
  AMOR_CHECK(predictions.shape() == targets.shape(),
             "score_tokens: predictions {} do not match targets {}", predictions.str(),
             targets.str());
  const int64_t n = targets.size(0), T = targets.size(1);
  const int32_t* p = predictions.data<int32_t>();
  const int32_t* y = targets.data<int32_t>();
  TokenScore s;
  s.per_example.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t c = 0, l = 0;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t want = y[i * T + t];
      if (want == kIgnore) continue;
      ++l;
      c += p[i * T + t] == want;
    }
    s.per_example[static_cast<size_t>(i)] = l ? static_cast<double>(c) / static_cast<double>(l)
                                              : std::numeric_limits<double>::quiet_NaN();
    s.correct += c;
    s.labelled += l;
  }
  AMOR_CHECK(s.labelled > 0, "score_tokens: targets {} have no labelled position (all are {})",
             targets.str(), kIgnore);
  s.accuracy = static_cast<double>(s.correct) / static_cast<double>(s.labelled);
  return s;
}

}  // namespace amor::synthetic
