// bench-ops: times the memory-bound ops on the GPU against a device-to-device copy of the same
// bytes, measured in the same run.
//
//   bench-ops OUT.csv [--only SUBSTRING] [--reps N]
//
// For each op and shape: warm-up calls, then N timed calls (default 30), each between two CUDA
// events; the median is reported. The inputs rotate over several sets so that together they
// exceed the L2 cache (a single set would be measured out of the cache). "bytes" is the least the
// op must move through device memory: every input read once, every output written once (the
// formula per op is next to its case below). GB/s = bytes / time; "vs copy" = time of a
// cudaMemcpy D2D moving the same bytes (bytes / 2 read + bytes / 2 written) over the op's time:
// 1.0 means the op runs at copy bandwidth. Small (decode) shapes are dominated by launch and host
// overhead, which is part of what they cost. Prints a table and writes it as CSV (temp + rename).
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/adamw/adamw.h"
#include "kernels/cast/cast.h"
#include "kernels/conv1d/conv1d.h"
#include "kernels/core/backend.h"
#include "kernels/core/caching_allocator.h"
#include "kernels/core/cuda_check.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/embedding/embedding.h"
#include "kernels/grad_norm/grad_norm.h"
#include "kernels/l2norm/l2norm.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_gated.h"
#include "kernels/rope/rope.h"
#include "kernels/swiglu/swiglu.h"
#include "tests/cuda/bench_util.h"

namespace amor {
namespace {

using Run = std::function<void()>;

struct Case {
  std::string op, shape;
  DType dtype;
  double bytes;                       // least bytes moved per call
  std::function<Run()> make;          // allocates one set of inputs, returns the call on it
};

struct Result {
  Case c;
  double op_us = 0, copy_us = 0;
};

constexpr double kRotateBytes = 512.0 * (1 << 20);  // input sets together: ~10x the H200's L2
constexpr int64_t kPoolFloats = int64_t(96) << 20;   // random values that inputs are cut from

// ---- inputs: slices of one random f32 pool on the device, converted to the dtype.
class Inputs {
 public:
  Inputs() {
    Tensor host = Tensor::empty({kPoolFloats}, DType::F32);
    float* p = host.data<float>();
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < kPoolFloats; ++i) {  // xorshift64*, sum of 4 uniforms ~ N(0, 1/3)
      float acc = 0;
      for (int k = 0; k < 4; ++k) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        acc += float((s * 0x2545f4914f6cdd1dull) >> 40) * 0x1p-24f - 0.5f;
      }
      p[i] = acc * 1.7f;
    }
    pool_ = host.to(Device::CUDA);
  }
  // A fresh cuda tensor of `shape` and dtype d filled from the pool, piece by piece from varying
  // offsets (so two inputs differ, and tensors larger than the pool are filled too).
  Tensor get(const Shape& shape, DType d) {
    const int64_t n = shape_numel(shape);
    Tensor out = Tensor::empty(shape, d, Device::CUDA);
    constexpr int64_t kPiece = kPoolFloats / 2;
    for (int64_t off = 0; off < n; off += kPiece) {
      const int64_t len = std::min(kPiece, n - off);
      next_ = (next_ + 7919 * 4) % (kPoolFloats - len + 1);
      const int64_t start = next_ - next_ % 4;  // slices stay 16-byte aligned
      Tensor dst = out.slice_flat(off, {len});
      cast_into(pool_.slice_flat(start, {len}), dst);
    }
    return out;
  }

 private:
  Tensor pool_;
  int64_t next_ = 0;
};

double sz(DType d) { return double(dtype_size(d)); }

std::string shape_of(const Shape& s) { return shape_str(s); }

// Median time of run(i % sets) over reps calls, after one warm-up pass over every set.
template <class F>
double time_us(int sets, int reps, F&& run) {
  return bench::time_us(reps, [&](int i) { run(i % sets); }, sets + 2);
}

int sets_for(double bytes) {
  return std::clamp(int(std::ceil(kRotateBytes / std::max(bytes, 1.0))), 1, 8);
}

Result measure(const Case& c, int reps) {
  Result r{c};
  const int sets = sets_for(c.bytes);
  std::vector<Run> runs;
  for (int i = 0; i < sets; ++i) runs.push_back(c.make());
  r.op_us = time_us(sets, reps, [&](int i) { runs[i](); });
  runs.clear();
  // The reference: a D2D copy of bytes / 2 (read once, written once), rotated the same way.
  const size_t half = std::max<size_t>(size_t(c.bytes / 2), 16);
  std::vector<Tensor> src, dst;
  for (int i = 0; i < sets; ++i) {
    src.push_back(Tensor::empty({int64_t(half)}, DType::U8, Device::CUDA));
    dst.push_back(Tensor::empty({int64_t(half)}, DType::U8, Device::CUDA));
    src.back().zero_();
  }
  r.copy_us = time_us(sets, reps, [&](int i) {
    AMOR_CUDA_CHECK(cudaMemcpyAsync(dst[i].raw_data(), src[i].raw_data(), half,
                                    cudaMemcpyDeviceToDevice));
  });
  return r;
}

// ---- the cases. Shapes: the 1.5B presets (d = 2048, d_ff = 4096, d_inner = 4096, 32 attention
// heads / 24 GDN heads of 64, V = 128256) at B = 4, T = 2048 (8192 tokens), plus decode (T = 1).
std::vector<Case> cases(Inputs& in) {
  std::vector<Case> cs;
  const int64_t N = 8192, d = 2048;
  auto add_case = [&](std::string op, const Shape& shape, DType dt, double bytes,
                      std::function<Run()> make) {
    cs.push_back(Case{std::move(op), shape_of(shape), dt, bytes, std::move(make)});
  };

  for (DType dt : {DType::BF16, DType::F32}) {
    const Shape s{N, d};
    const double n = double(N * d), e = sz(dt);
    add_case("add", s, dt, 3 * n * e, [&in, s, dt] {  // a, b read; y written
      Tensor a = in.get(s, dt), b = in.get(s, dt);
      return Run([a, b] { add(a, b); });
    });
    add_case("silu_backward", s, dt, 3 * n * e, [&in, s, dt] {
      Tensor x = in.get(s, dt), g = in.get(s, dt);
      return Run([x, g] { silu_backward(x, g); });
    });
    add_case("rmsnorm_forward", s, dt, 2 * n * e + d * e + N * 4.0, [&in, s, dt, d] {
      Tensor x = in.get(s, dt), w = in.get({d}, dt);  // x, w read; y, rstd written
      return Run([x, w] { rmsnorm_forward(x, w, 1e-5); });
    });
    add_case("rmsnorm_backward", s, dt, 3 * n * e + d * e + N * 4.0 + d * 4.0,
             [&in, s, dt, d] {  // x, dy, w, rstd read; dx, dw written
               Tensor x = in.get(s, dt), w = in.get({d}, dt), g = in.get(s, dt);
               Tensor r = rmsnorm_forward(x, w, 1e-5).rstd;
               return Run([x, w, r, g] { rmsnorm_backward(x, w, r, g); });
             });
  }
  {
    const DType dt = DType::BF16;
    const double e = 2;
    const Shape s{N, d};
    const double n = double(N * d);
    add_case("add_ (f32 += bf16)", s, DType::F32, n * (4 + 4 + 2), [&in, s] {
      Tensor a = in.get(s, DType::F32), b = in.get(s, DType::BF16);
      return Run([a, b]() mutable { add_(a, b, 1.0); });
    });
    add_case("bias_softplus_backward", {N, 64}, dt, 3 * N * 64 * e + 64 * (e + 4), [&in, N] {
      Tensor x = in.get({N, 64}, DType::BF16), b = in.get({64}, DType::BF16);
      Tensor g = in.get({N, 64}, DType::BF16);
      return Run([x, b, g] { bias_softplus_backward(x, b, g); });
    });
    add_case("channel_scale_backward", s, dt, 3 * n * e + d * (e + 4), [&in, s, d] {
      Tensor x = in.get(s, DType::BF16), v = in.get({d}, DType::BF16), g = in.get(s, DType::BF16);
      return Run([x, v, g] { channel_scale_backward(x, v, g); });
    });
    const Shape f{N, 4096};
    add_case("swiglu_forward", f, dt, 3 * double(N * 4096) * e, [&in, f] {
      Tensor g = in.get(f, DType::BF16), u = in.get(f, DType::BF16);
      return Run([g, u] { swiglu_forward(g, u); });
    });
    add_case("swiglu_backward", f, dt, 5 * double(N * 4096) * e, [&in, f] {
      Tensor g = in.get(f, DType::BF16), u = in.get(f, DType::BF16), h = in.get(f, DType::BF16);
      return Run([g, u, h] { swiglu_backward(g, u, h); });
    });
    // Gated norms: Mamba2 (one group of d_inner), GDN (v heads of 128, 24 of them).
    for (auto [dim, group, nbg] : {std::tuple<int64_t, int64_t, bool>{4096, 4096, false},
                                   std::tuple<int64_t, int64_t, bool>{3072, 128, true}}) {
      const Shape gs{N, dim};
      const double gn = double(N * dim);
      const std::string tag = nbg ? " (GDN)" : " (Mamba2)";
      add_case("rmsnorm_gated_forward" + tag, gs, dt, 3 * gn * e + N * (dim / group) * 4.0,
               [&in, gs, dim, group, nbg] {  // x, z read; y written (+ w, rstd)
                 Tensor x = in.get(gs, DType::BF16), z = in.get(gs, DType::BF16);
                 Tensor w = in.get({dim}, DType::BF16);
                 return Run([x, z, w, group, nbg] {
                   rmsnorm_gated_forward(x, z, w, group, 1e-5, nbg);
                 });
               });
      add_case("rmsnorm_gated_backward" + tag, gs, dt, 5 * gn * e + N * (dim / group) * 4.0,
               [&in, gs, dim, group, nbg] {  // x, z, dy read; dx, dz written (+ rstd, w, dw)
                 Tensor x = in.get(gs, DType::BF16), z = in.get(gs, DType::BF16);
                 Tensor w = in.get({dim}, DType::BF16), g = in.get(gs, DType::BF16);
                 Tensor r = rmsnorm_gated_forward(x, z, w, group, 1e-5, nbg).rstd;
                 return Run([x, z, w, r, g, group, nbg] {
                   rmsnorm_gated_backward(x, z, w, r, g, group, 1e-5, nbg);
                 });
               });
    }
    const Shape qk{4, 2048, 24, 64};
    const double qn = double(shape_numel(qk)), rows = qn / 64;
    add_case("l2norm_forward", qk, dt, 2 * qn * e + rows * 4, [&in, qk] {
      Tensor x = in.get(qk, DType::BF16);
      return Run([x] { l2norm_forward(x, 1e-6); });
    });
    add_case("l2norm_backward", qk, dt, 3 * qn * e + rows * 4, [&in, qk] {
      Tensor x = in.get(qk, DType::BF16), g = in.get(qk, DType::BF16);
      Tensor r = l2norm_forward(x, 1e-6).rstd;
      return Run([x, r, g] { l2norm_backward(x, r, g); });
    });
    const Shape rq{4, 2048, 32, 64};
    add_case("rope_forward", rq, dt, 2 * double(shape_numel(rq)) * e, [&in, rq] {
      Tensor x = in.get(rq, DType::BF16);
      return Run([x] { rope_forward(x, 0); });
    });
    const Shape rd{4, 1, 32, 64};
    add_case("rope_forward (decode)", rd, dt, 2 * double(shape_numel(rd)) * e, [&in, rd] {
      Tensor x = in.get(rd, DType::BF16);
      return Run([x] { rope_forward(x, 5000); });
    });
    add_case("rmsnorm_forward (decode)", {4, d}, dt, 2 * 4.0 * d * e + d * e + 16,
             [&in, d] {
               Tensor x = in.get({4, d}, DType::BF16), w = in.get({d}, DType::BF16);
               return Run([x, w] { rmsnorm_forward(x, w, 1e-5); });
             });
    // Mamba2's xBC conv: C = d_inner + 2 N_state = 4352, K = 4, bias, SiLU.
    const int64_t C = 4352, K = 4;
    const Shape xs{4, 2048, C};
    const double xn = double(shape_numel(xs));
    add_case("conv1d_forward", xs, dt, 2 * xn * e, [&in, xs, C, K] {  // x read, y written
      Tensor x = in.get(xs, DType::BF16), w = in.get({C, K}, DType::BF16);
      Tensor b = in.get({C}, DType::BF16);
      return Run([x, w, b] { conv1d_forward(x, w, b, true); });
    });
    add_case("conv1d_backward", xs, dt, 3 * xn * e, [&in, xs, C, K] {  // x, dy read; dx written
      Tensor x = in.get(xs, DType::BF16), w = in.get({C, K}, DType::BF16);
      Tensor b = in.get({C}, DType::BF16), g = in.get(xs, DType::BF16);
      return Run([x, w, b, g] { conv1d_backward(x, w, b, true, Tensor(), g); });
    });
    add_case("conv1d_step (decode)", {4, C}, dt, 4.0 * C * e * (2 + 2 * (K - 1)), [&in, C, K] {
      Tensor x = in.get({4, C}, DType::BF16), w = in.get({C, K}, DType::BF16);
      Tensor b = in.get({C}, DType::BF16), st = in.get({4, C, K - 1}, DType::BF16);
      return Run([x, w, b, st]() mutable { conv1d_step(x, st, w, b, true); });
    });
    // Embedding at V = 128256: the gather (rows read, y written) and the scatter into f32 dW
    // (dy read, dW [V, d] f32 zeroed and written).
    const int64_t V = 128256;
    add_case("embedding_forward", {4, 2048, d}, dt, 2.0 * N * d * e, [&in, V, d] {
      std::vector<int32_t> ids(8192);
      uint64_t s = 12345;
      for (auto& id : ids) s = s * 6364136223846793005ull + 1, id = int32_t((s >> 33) % V);
      Tensor t = Tensor::from_vector<int32_t>({4, 2048}, ids).to(Device::CUDA);
      Tensor w = in.get({V, d}, DType::BF16);
      return Run([t, w] { embedding_forward(t, w); });
    });
    add_case("embedding_backward", {4, 2048, d}, dt, double(N) * d * e + double(V) * d * 4,
             [&in, V, d] {
               std::vector<int32_t> ids(8192);
               uint64_t s = 777;
               for (auto& id : ids) s = s * 6364136223846793005ull + 1, id = int32_t((s >> 33) % V);
               Tensor t = Tensor::from_vector<int32_t>({4, 2048}, ids).to(Device::CUDA);
               Tensor g = in.get({4, 2048, d}, DType::BF16);
               return Run([t, g, V] { embedding_backward(t, g, V); });
             });
  }
  // Optimizer and gradient pieces over a 64M-parameter unit (a 1.5B layer is ~63M).
  const int64_t P = int64_t(64) << 20;
  for (DType gdt : {DType::F32, DType::BF16}) {
    add_case("adamw_step", {P}, gdt, double(P) * (24 + sz(gdt)), [&in, P, gdt] {
      Tensor p = in.get({P}, DType::F32), g = in.get({P}, gdt), m = in.get({P}, DType::F32);
      Tensor v = mul(m, m);  // second moments are >= 0
      return Run([p, g, m, v]() mutable {
        adamw_step(p, g, m, v, 10, 1e-4, 0.9, 0.95, 1e-8, 0.1);
      });
    });
    add_case("sum_of_squares", {P}, gdt, double(P) * sz(gdt), [&in, P, gdt] {
      std::vector<Tensor> g{in.get({P}, gdt)};
      return Run([g] { sum_of_squares(g); });
    });
    add_case("scale_grads", {P}, gdt, 2.0 * P * sz(gdt), [&in, P, gdt] {
      std::vector<Tensor> g{in.get({P}, gdt)};
      return Run([g]() mutable { scale_grads(g, 0.999); });
    });
  }
  add_case("cast f32->bf16", {P}, DType::BF16, double(P) * 6, [&in, P] {
    Tensor x = in.get({P}, DType::F32);
    return Run([x] { cast(x, DType::BF16); });
  });
  add_case("cast bf16->f32", {P}, DType::F32, double(P) * 6, [&in, P] {
    Tensor x = in.get({P}, DType::BF16);
    return Run([x] { cast(x, DType::F32); });
  });
  return cs;
}

void write_csv(const std::string& path, const std::vector<Result>& rs) {
  bench::write_csv("bench-ops", path,
                   "op,shape,dtype,bytes,median_us,gb_per_s,copy_us,copy_gb_per_s,vs_copy",
                   [&](FILE* f) {
                     for (const Result& r : rs)
                       std::fprintf(f, "\"%s\",\"%s\",%s,%.0f,%.3f,%.1f,%.3f,%.1f,%.3f\n",
                                    r.c.op.c_str(), r.c.shape.c_str(), dtype_name(r.c.dtype),
                                    r.c.bytes, r.op_us, r.c.bytes / r.op_us / 1e3, r.copy_us,
                                    r.c.bytes / r.copy_us / 1e3, r.copy_us / r.op_us);
                   });
}

int run(const bench::Args& args) {
  const std::string& csv = args.csv;
  const std::string& only = args.only;
  const int reps = args.reps;
  cudaDeviceProp prop{};
  AMOR_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("bench-ops on %s (%d SMs, L2 %d MB), median of %d calls\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, reps);
  std::printf("%-34s %-18s %-5s %10s %10s %9s %9s %8s\n", "op", "shape", "dtype", "MB", "us",
              "GB/s", "copyGB/s", "vs copy");
  Inputs in;
  std::vector<Result> results;
  for (const Case& c : cases(in)) {
    if (!only.empty() && c.op.find(only) == std::string::npos) continue;
    Result r = measure(c, reps);
    std::printf("%-34s %-18s %-5s %10.3f %10.1f %9.0f %9.0f %8.2f\n", c.op.c_str(),
                c.shape.c_str(), dtype_name(c.dtype), c.bytes / 1e6, r.op_us,
                c.bytes / r.op_us / 1e3, c.bytes / r.copy_us / 1e3, r.copy_us / r.op_us);
    std::fflush(stdout);
    results.push_back(std::move(r));
    allocator(Device::CUDA).release_cached();  // the next case starts from a clean cache
  }
  write_csv(csv, results);
  std::printf("wrote %s\n", csv.c_str());
  return 0;
}

}  // namespace
}  // namespace amor

int main(int argc, char** argv) {
  return amor::bench::run_command(argc, argv, "bench-ops", true, 30, amor::run);
}
