#include "models/amor/row_ops.h"

#include "kernels/cast/cast.h"
#include "kernels/core/check.h"
#include "kernels/embedding/embedding.h"
#include "kernels/linear/gemm_cpu.h"
#include "kernels/linear/linear.h"

namespace amor::model {

namespace {

// Calls f(first, count) for each maximal run of consecutive indices rows[first .. first+count).
template <class F>
void for_each_run(const std::vector<int64_t>& rows, F&& f) {
  size_t i = 0;
  while (i < rows.size()) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    f(i, j - i);
    i = j;
  }
}

void check_rows(const char* op, const std::vector<int64_t>& rows, int64_t n) {
  for (size_t i = 0; i < rows.size(); ++i)
    AMOR_CHECK(rows[i] >= 0 && rows[i] < n && (i == 0 || rows[i] > rows[i - 1]),
               "{}: row index {} at position {} is not increasing within [0, {})", op, rows[i], i,
               n);
}

// The row indices as an i32 tensor on `device` (the embedding kernels' index type).
Tensor row_ids(const std::vector<int64_t>& rows, Device device) {
  Tensor ids = Tensor::empty({static_cast<int64_t>(rows.size())}, DType::I32);
  for (size_t i = 0; i < rows.size(); ++i) ids.data<int32_t>()[i] = static_cast<int32_t>(rows[i]);
  return ids.to(device);
}

}  // namespace

std::vector<int64_t> firing_rows(const Tensor& gate) {
  check_dtype("firing_rows", "gate", gate, DType::U8);
  Tensor g = gate.to(Device::CPU);
  const uint8_t* p = g.data<uint8_t>();
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < g.numel(); ++i)
    if (p[i]) rows.push_back(i);
  return rows;
}

Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& rows) {
  const char* op = "gather_rows";
  check_dim(op, "x", x, 2);
  AMOR_CHECK(!rows.empty(), "{}: no rows to gather from {}", op, x.str());
  check_rows(op, rows, x.size(0));
  const int64_t w = x.size(1);
  // On the GPU one gather kernel (the embedding lookup: rows of x by index) instead of a copy per
  // run of consecutive rows (scattered firing tokens make thousands of runs).
  if (!x.is_cpu()) return embedding_forward(row_ids(rows, x.device()), x);
  Tensor out = Tensor::empty({static_cast<int64_t>(rows.size()), w}, x.dtype(), x.device());
  for_each_run(rows, [&](size_t first, size_t count) {
    const int64_t n = static_cast<int64_t>(count);
    out.slice_flat(static_cast<int64_t>(first) * w, {n, w})
        .copy_from(x.slice_flat(rows[first] * w, {n, w}));
  });
  return out;
}

Tensor scatter_rows(const Tensor& src, const std::vector<int64_t>& rows, int64_t n_rows) {
  const char* op = "scatter_rows";
  check_shape(op, "src", src, {static_cast<int64_t>(rows.size()), kAny});
  check_rows(op, rows, n_rows);
  const int64_t w = src.size(1);
  // On the GPU the embedding's scatter-add into zeros (each row receives exactly one source row,
  // so the sum is a copy and its order cannot matter); it accumulates in f32.
  if (!src.is_cpu()) {
    AMOR_CHECK(n_rows <= int64_t(0x7fffffff), "{}: {} rows exceed the i32 indices of the cuda path", op, n_rows);
    return cast(embedding_backward(row_ids(rows, src.device()), src, n_rows), src.dtype());
  }
  Tensor out = Tensor::zeros({n_rows, w}, src.dtype(), src.device());
  for_each_run(rows, [&](size_t first, size_t count) {
    const int64_t n = static_cast<int64_t>(count);
    out.slice_flat(rows[first] * w, {n, w})
        .copy_from(src.slice_flat(static_cast<int64_t>(first) * w, {n, w}));
  });
  return out;
}

Tensor row_stable_linear(const Tensor& x, const Tensor& w) {
  const char* op = "row_stable_linear";
  if (!x.is_cpu()) return linear_forward(x, w);
  check_float_args(op, {{"x", &x}, {"w", &w}});
  AMOR_CHECK(x.dim() >= 1, "{}: argument 'x' is {}, expected at least 1 dimension", op, x.str());
  check_shape(op, "w", w, {kAny, x.size(-1)});
  const int64_t in = w.size(1), out = w.size(0);
  const int64_t rows = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  Shape shape = x.shape();
  shape.back() = out;
  Tensor y = Tensor::empty(shape, x.dtype());
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t r = 0; r < rows; ++r)
      gemm_cpu<T>(false, true, 1, out, in, T(1), xp + r * in, w.data<T>(), T(0), yp + r * out);
  });
  return y;
}

}  // namespace amor::model
