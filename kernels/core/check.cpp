#include "kernels/core/check.h"

namespace amor {

void check_defined(const char* op, const char* name, const Tensor& t) {
  AMOR_CHECK(t.defined(), "{}: argument '{}' is undefined", op, name);
}

void check_shape(const char* op, const char* name, const Tensor& t, const Shape& expected) {
  check_defined(op, name, t);
  bool ok = t.dim() == static_cast<int64_t>(expected.size());
  for (size_t i = 0; ok && i < expected.size(); ++i)
    ok = expected[i] == kAny || expected[i] == t.shape()[i];
  if (!ok) {
    std::string e = "[";
    for (size_t i = 0; i < expected.size(); ++i) {
      if (i) e += ",";
      e += expected[i] == kAny ? std::string("*") : std::to_string(expected[i]);
    }
    e += "]";
    throw Error(fmt::format("{}: argument '{}' is {}, expected shape {}", op, name, t.str(), e));
  }
}

void check_dim(const char* op, const char* name, const Tensor& t, int64_t dim) {
  check_defined(op, name, t);
  AMOR_CHECK(t.dim() == dim, "{}: argument '{}' is {}, expected {} dimensions", op, name, t.str(),
             dim);
}

void check_dtype(const char* op, const char* name, const Tensor& t, DType dtype) {
  check_defined(op, name, t);
  AMOR_CHECK(t.dtype() == dtype, "{}: argument '{}' is {}, expected dtype {}", op, name, t.str(),
             dtype_name(dtype));
}

void check_float_args(const char* op,
                      std::initializer_list<std::pair<const char*, const Tensor*>> args) {
  const Tensor* first = nullptr;
  const char* first_name = nullptr;
  for (auto& [name, t] : args) {
    check_defined(op, name, *t);
    AMOR_CHECK(is_floating(t->dtype()), "{}: argument '{}' is {}, expected a floating dtype", op,
               name, t->str());
    if (!first) {
      first = t;
      first_name = name;
      continue;
    }
    AMOR_CHECK(t->device() == first->device(),
               "{}: arguments '{}' ({}) and '{}' ({}) are on different devices", op, first_name,
               first->str(), name, t->str());
    AMOR_CHECK(t->dtype() == first->dtype(),
               "{}: arguments '{}' ({}) and '{}' ({}) have different dtypes", op, first_name,
               first->str(), name, t->str());
  }
}

void fail_no_cuda(const char* op, const Tensor& t) {
  throw Error(fmt::format("{}: no CUDA implementation yet for {} (the CUDA backend lands op by op)",
                          op, t.str()));
}

}  // namespace amor
