// Helpers of the CUDA parity tests: inputs rounded once to the storage dtype, upload and download,
// poisoned allocations, and the comparison that prints one table line per checked output.
//
// The protocol (design §2): inputs are drawn in f32 on the cpu, rounded to the GPU dtype once
// (bf16 or f32), the cpu reference runs in f32 on exactly those rounded values, the GPU runs on
// the dtype; outputs are compared by relative RMS error rms(a - b) / rms(b). Output blocks are
// filled with NaN before each GPU call, so an element a kernel forgot to write fails the check.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/core/backend.h"
#include "kernels/core/tensor.h"

namespace amor::parity {

// At the top of every test: skips (with the reason) where there is no GPU.
#define AMOR_REQUIRE_GPU()                                                                   \
  do {                                                                                       \
    if (!::amor::cuda_available())                                                           \
      GTEST_SKIP() << "no CUDA GPU here: the cuda parity tests run on the GPU machine";      \
  } while (0)

// Tolerances on rms(a - b) / rms(b), design §2.
inline double out_tol(DType d) { return d == DType::BF16 ? 5e-3 : 1e-5; }
inline double grad_tol(DType d) { return d == DType::BF16 ? 1e-2 : 1e-5; }
inline constexpr double kF32Tol = 1e-5;  // results stored in f32 (statistics, parameter grads)

// N(0, scale) f32 values (never all zero), rounded to `d` and back: what both sides compute on.
Tensor input(const Shape& shape, uint64_t seed, DType d, double scale = 1.0);
// Uniform [lo, hi) f32 values rounded through `d`.
Tensor input_uniform(const Shape& shape, uint64_t seed, DType d, double lo, double hi);
// The f32 cpu tensor x (already representable in d) as a cuda tensor of dtype d.
Tensor up(const Tensor& x, DType d);
// A cuda (or cpu) tensor as an f32 cpu tensor.
Tensor down(const Tensor& x);

// Fills `copies` cached cuda blocks of each size with NaN bytes (0xFF: NaN as f32 and as bf16) and
// returns them to the caching allocator, which hands them out again last-in first-out: the next
// allocations of those sizes (the op's outputs) start as NaN.
void poison(const std::vector<std::pair<Shape, DType>>& outputs, int copies = 3);

// rel_rms(down(gpu), ref) <= tol, printed as one table line: op, shape, dtype, output, error.
void expect_close(const std::string& op, const std::string& output, const Tensor& gpu,
                  const Tensor& ref, double tol);
// Bitwise equality of down(gpu) and ref (NaN equals NaN), printed the same way.
void expect_equal(const std::string& op, const std::string& output, const Tensor& gpu,
                  const Tensor& ref);

// The message of the amor::Error f throws ("(no error)" if none).
std::string error_of(const std::function<void()>& f);

}  // namespace amor::parity
