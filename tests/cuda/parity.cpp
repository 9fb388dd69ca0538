#include "tests/cuda/parity.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor::parity {

Tensor input(const Shape& shape, uint64_t seed, DType d, double scale) {
  return testing::randn(shape, seed, DType::F32, scale).to(d).to(DType::F32);
}

Tensor input_uniform(const Shape& shape, uint64_t seed, DType d, double lo, double hi) {
  return testing::uniform(shape, seed, lo, hi, DType::F32).to(d).to(DType::F32);
}

Tensor up(const Tensor& x, DType d) { return x.to(d).to(Device::CUDA); }

Tensor down(const Tensor& x) { return x.to(Device::CPU).to(DType::F32); }

void poison(const std::vector<std::pair<Shape, DType>>& outputs, int copies) {
  std::vector<Tensor> blocks;
  for (const auto& [shape, dtype] : outputs) {
    const int64_t bytes = shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype));
    Tensor nan_bytes = Tensor::empty({bytes}, DType::U8);
    std::memset(nan_bytes.raw_data(), 0xff, static_cast<size_t>(bytes));
    for (int c = 0; c < copies; ++c) {
      Tensor block = Tensor::empty({bytes}, DType::U8, Device::CUDA);
      block.copy_from(nan_bytes);
      blocks.push_back(block);
    }
  }
  backend(Device::CUDA).synchronize();
}  // the blocks go back to the allocator's free lists here

namespace {

void print_line(const std::string& op, const std::string& output, const Tensor& gpu,
                const std::string& what) {
  std::printf("[parity] %-40s %-9s %-18s %-5s %s\n", op.c_str(), output.c_str(),
              shape_str(gpu.shape()).c_str(), dtype_name(gpu.dtype()), what.c_str());
  std::fflush(stdout);
}

}  // namespace

void expect_close(const std::string& op, const std::string& output, const Tensor& gpu,
                  const Tensor& ref, double tol) {
  ASSERT_EQ(gpu.shape(), ref.shape()) << op << " " << output;
  const double err = testing::rel_rms(down(gpu), ref);
  char what[96];
  std::snprintf(what, sizeof(what), "rel_rms %.3e  (tol %.0e)%s", err, tol,
                err <= tol ? "" : "  FAIL");
  print_line(op, output, gpu, what);
  EXPECT_LE(err, tol) << op << " " << output << " " << gpu.str();
}

void expect_equal(const std::string& op, const std::string& output, const Tensor& gpu,
                  const Tensor& ref) {
  ASSERT_EQ(gpu.shape(), ref.shape()) << op << " " << output;
  const Tensor a = down(gpu);
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.item(i), y = ref.item(i);
    const bool same = x == y || (std::isnan(x) && std::isnan(y));
    if (!same && mismatches++ == 0) first = i;
  }
  char what[96];
  std::snprintf(what, sizeof(what), "exact: %lld mismatches%s", static_cast<long long>(mismatches),
                mismatches ? "  FAIL" : "");
  print_line(op, output, gpu, what);
  EXPECT_EQ(mismatches, 0) << op << " " << output << ": first at " << first << ": "
                           << (first >= 0 ? a.item(first) : 0.0) << " vs "
                           << (first >= 0 ? ref.item(first) : 0.0);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace amor::parity
