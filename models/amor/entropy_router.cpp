#include "models/amor/entropy_router.h"

#include <cmath>
#include <random>

#include "kernels/cast/cast.h"
#include "kernels/core/check.h"
#include "kernels/core/env_switch.h"
#include "kernels/core/error.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/linear/gemm_cpu.h"
#include "kernels/linear/linear.h"
#include "kernels/router_mlp/router_mlp.h"
#include "models/io/safetensors.h"

namespace amor::model {
namespace {

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
double silu(double a) { return a * sigmoid(a); }
// d/da a sigmoid(a) = sigmoid(a) (1 + a (1 - sigmoid(a)))
double silu_grad(double a) {
  const double s = sigmoid(a);
  return s * (1.0 + a * (1.0 - s));
}

void check_f64_cpu(const char* op, const char* name, const Tensor& t) {
  check_defined(op, name, t);
  AMOR_CHECK(t.dtype() == DType::F64 && t.is_cpu(), "{}: argument '{}' is {}, expected f64 on the cpu",
             op, name, t.str());
}

Tensor uniform(const Shape& shape, double bound, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-bound, bound);
  Tensor t = Tensor::empty(shape, DType::F64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = u(rng);
  return t;
}

}  // namespace

RouterParams router_init(int64_t d, int64_t width, uint64_t seed, double bias) {
  AMOR_CHECK(d >= 1 && width >= 1, "router_init: d {} and width {} must be >= 1", d, width);
  std::mt19937_64 rng(seed);
  RouterParams p;
  const double b_in = 1.0 / std::sqrt(static_cast<double>(d));
  const double b_hid = 1.0 / std::sqrt(static_cast<double>(width));
  p.w1 = uniform({width, d}, b_in, rng);
  p.b1 = uniform({width}, b_in, rng);
  p.w2 = uniform({1, width}, b_hid, rng);
  p.b2 = Tensor::full<double>({1}, bias);
  p.u = Tensor::zeros({1, d}, DType::F64);
  return p;
}

Tensor router_forward(const RouterParams& p, const Tensor& x, RouterSaved* saved) {
  const char* op = "router_forward";
  check_f64_cpu(op, "x", x);
  check_dim(op, "x", x, 2);
  const int64_t n = x.size(0), d = p.d(), W = p.width();
  AMOR_CHECK(x.size(1) == d, "{}: x is {} but the router's input width is {}", op, x.str(), d);
  Tensor a = Tensor::empty({n, W}, DType::F64);
  double* A = a.data<double>();
  const double* b1 = p.b1.data<double>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < W; ++j) A[i * W + j] = b1[j];
  if (n > 0) gemm_cpu<double>(false, true, n, W, d, 1.0, x.data<double>(), p.w1.data<double>(), 1.0, A);
  Tensor y = Tensor::empty({n}, DType::F64);
  double* Y = y.data<double>();
  const double* w2 = p.w2.data<double>();
  const double* u = p.u.data<double>();
  const double* X = x.data<double>();
  const double b2 = p.b2.data<double>()[0];
  for (int64_t i = 0; i < n; ++i) {
    double s = b2;
    for (int64_t j = 0; j < W; ++j) s += w2[j] * silu(A[i * W + j]);
    for (int64_t c = 0; c < d; ++c) s += u[c] * X[i * d + c];
    Y[i] = s;
  }
  if (saved) {
    saved->x = x;
    saved->a = a;
  }
  return y;
}

RouterParams router_backward(const RouterParams& p, const RouterSaved& saved, const Tensor& dy,
                             Tensor* dx) {
  const char* op = "router_backward";
  check_f64_cpu(op, "dy", dy);
  const int64_t n = saved.x.size(0), d = p.d(), W = p.width();
  check_shape(op, "dy", dy, {n});
  const double* X = saved.x.data<double>();
  const double* A = saved.a.data<double>();
  const double* DY = dy.data<double>();
  const double* w2 = p.w2.data<double>();
  RouterParams g;
  g.w1 = Tensor::zeros({W, d}, DType::F64);
  g.b1 = Tensor::zeros({W}, DType::F64);
  g.w2 = Tensor::zeros({1, W}, DType::F64);
  g.b2 = Tensor::zeros({1}, DType::F64);
  g.u = Tensor::zeros({1, d}, DType::F64);
  double* gw2 = g.w2.data<double>();
  double* gb1 = g.b1.data<double>();
  double* gu = g.u.data<double>();
  double gb2 = 0;
  // dA[i, j] = dy_i w2_j silu'(A[i, j])
  Tensor da = Tensor::empty({n, W}, DType::F64);
  double* DA = da.data<double>();
  for (int64_t i = 0; i < n; ++i) {
    gb2 += DY[i];
    for (int64_t c = 0; c < d; ++c) gu[c] += DY[i] * X[i * d + c];
    for (int64_t j = 0; j < W; ++j) {
      const double a = A[i * W + j];
      gw2[j] += DY[i] * silu(a);
      const double v = DY[i] * w2[j] * silu_grad(a);
      DA[i * W + j] = v;
      gb1[j] += v;
    }
  }
  g.b2.data<double>()[0] = gb2;
  if (n > 0) {
    // dW1 = dA^T x   [W, d]
    gemm_cpu<double>(true, false, W, d, n, 1.0, DA, X, 0.0, g.w1.data<double>());
  }
  if (dx) {
    // dx = dA W1 + dy u^T   [n, d]
    *dx = Tensor::empty({n, d}, DType::F64);
    double* DX = dx->data<double>();
    const double* u = p.u.data<double>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c) DX[i * d + c] = DY[i] * u[c];
    if (n > 0) gemm_cpu<double>(false, false, n, d, W, 1.0, DA, p.w1.data<double>(), 1.0, DX);
  }
  return g;
}

double router_mse(const RouterParams& p, const Tensor& x, const Tensor& h) {
  check_f64_cpu("router_mse", "h", h);
  const int64_t n = x.size(0);
  if (n == 0) return 0;
  Tensor y = router_forward(p, x);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = y.data<double>()[i] - h.data<double>()[i];
    s += e * e;
  }
  return s / static_cast<double>(n);
}

double router_fit(RouterParams& p, const Tensor& x, const Tensor& h, const RouterFitOptions& o) {
  const char* op = "router_fit";
  check_f64_cpu(op, "x", x);
  check_f64_cpu(op, "h", h);
  const int64_t n = x.size(0), d = p.d();
  check_shape(op, "h", h, {n});
  AMOR_CHECK(n >= 1, "{}: no tokens to fit on", op);
  AMOR_CHECK(o.steps >= 0 && o.batch >= 1 && o.lr > 0, "{}: steps {} >= 0, batch {} >= 1 and lr {} > 0 needed",
             op, o.steps, o.batch, o.lr);
  std::vector<Tensor*> params = p.all();
  const std::vector<bool> decay = {true, false, true, false, true};
  std::vector<Tensor> m1, m2;
  for (Tensor* t : params) {
    m1.push_back(Tensor::zeros(t->shape(), DType::F64));
    m2.push_back(Tensor::zeros(t->shape(), DType::F64));
  }
  std::mt19937_64 rng(o.seed ^ 0x726f75746572ull);  // "router"
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  const int64_t B = std::min(o.batch, n);
  Tensor xb = Tensor::empty({B, d}, DType::F64), hb = Tensor::empty({B}, DType::F64);
  for (int64_t step = 1; step <= o.steps; ++step) {
    for (int64_t i = 0; i < B; ++i) {
      const int64_t r = B == n ? i : pick(rng);
      std::copy(x.data<double>() + r * d, x.data<double>() + (r + 1) * d, xb.data<double>() + i * d);
      hb.data<double>()[i] = h.data<double>()[r];
    }
    RouterSaved saved;
    Tensor y = router_forward(p, xb, &saved);
    Tensor dy = Tensor::empty({B}, DType::F64);
    for (int64_t i = 0; i < B; ++i)
      dy.data<double>()[i] = 2.0 * (y.data<double>()[i] - hb.data<double>()[i]) / static_cast<double>(B);
    RouterParams g = router_backward(p, saved, dy);
    std::vector<Tensor*> grads = g.all();
    const double c1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
    const double c2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
    for (size_t k = 0; k < params.size(); ++k) {
      double* w = params[k]->data<double>();
      const double* gr = grads[k]->data<double>();
      double* a = m1[k].data<double>();
      double* b = m2[k].data<double>();
      for (int64_t i = 0; i < params[k]->numel(); ++i) {
        if (decay[k]) w[i] -= o.lr * o.weight_decay * w[i];
        a[i] = o.beta1 * a[i] + (1 - o.beta1) * gr[i];
        b[i] = o.beta2 * b[i] + (1 - o.beta2) * gr[i] * gr[i];
        w[i] -= o.lr * (a[i] / c1) / (std::sqrt(b[i] / c2) + o.eps);
      }
    }
  }
  return router_mse(p, x, h);
}

RouterParams router_params_to(const RouterParams& p, DType dtype, Device device) {
  RouterParams q;
  q.w1 = p.w1.to(dtype).to(device);
  q.b1 = p.b1.to(dtype).to(device);
  q.w2 = p.w2.to(dtype).to(device);
  q.b2 = p.b2.to(dtype).to(device);
  q.u = p.u.to(dtype).to(device);
  return q;
}

Tensor router_forward_ops(const RouterParams& p, const Tensor& x, const Tensor& ones_in) {
  const char* op = "router_forward_ops";
  check_dim(op, "x", x, 2);
  const int64_t n = x.size(0), d = p.d(), W = p.width();
  AMOR_CHECK(x.size(1) == d, "{}: x is {} but the router's input width is {}", op, x.str(), d);
  AMOR_CHECK(p.w1.dtype() == x.dtype() && p.w1.device() == x.device(),
             "{}: the parameters are {} on {}, x {} on {}: convert them with router_params_to", op,
             dtype_name(p.w1.dtype()), device_name(p.w1.device()), dtype_name(x.dtype()),
             device_name(x.device()));
  Tensor ones = ones_in;
  if (ones.defined()) {
    check_shape(op, "ones", ones, {n, 1});
    AMOR_CHECK(ones.dtype() == x.dtype() && ones.device() == x.device(), "{}: ones is {} on {}, x {} on {}", op,
               dtype_name(ones.dtype()), device_name(ones.device()), dtype_name(x.dtype()), device_name(x.device()));
  } else {
    std::vector<double> one(static_cast<size_t>(n), 1.0);
    ones = Tensor::from_vector<double>({n, 1}, one).to(x.dtype()).to(x.device());
  }
  // a = x W1^T + 1 b1^T;  y = SiLU(a) w2^T + x u^T + 1 b2
  const Tensor a = add(linear_forward(x, p.w1), linear_forward(ones, p.b1.view({W, 1})));
  Tensor y = add(linear_forward(silu_forward(a), p.w2), linear_forward(x, p.u));
  y = add(y, linear_forward(ones, p.b2.view({1, 1})));
  return y.view({n});
}

bool EntropyRouter::read_router_op_switch() { return env_choice("AMOR_ROUTER_OP", {"0", "1"}, "1") == "1"; }

Tensor EntropyRouter::predict(int64_t k, const Tensor& hn) const {
  const char* op = "EntropyRouter::predict";
  AMOR_CHECK(k >= 0 && k < static_cast<int64_t>(blocks.size()), "{}: block {} of a router for {} blocks",
             op, k, blocks.size());
  check_defined(op, "hn", hn);
  AMOR_CHECK(hn.dim() >= 1 && hn.size(-1) == d(), "{}: hn is {} but the router reads width {}", op,
             hn.str(), d());
  const int64_t n = hn.numel() / d();
  if (!hn.is_cpu()) {  // f32 through the tensor ops, the parameters copied to hn's device once
    if (device_blocks_.empty() || device_ != hn.device()) {
      device_blocks_.clear();
      for (const RouterParams& p : blocks) device_blocks_.push_back(router_params_to(p, DType::F32, hn.device()));
      device_ = hn.device();
    }
    Shape shape(hn.shape().begin(), hn.shape().end() - 1);
    const RouterParams& p = device_blocks_[static_cast<size_t>(k)];
    // A decode step's few rows: one op of two launches (kernels/router_mlp) reads hn in its own
    // dtype, where the tensor ops below are ten launches; more rows (a prefill) take the GEMMs.
    // On unless AMOR_ROUTER_OP=0 (read once): its kernels passed on the GPU machine (session 15,
    // tests/cuda/RESULTS.md), and the batch-1 decode step is 0.09 ms faster with it.
    static const bool op = read_router_op_switch();
    if (op && n <= kRouterMlpMaxRows) return router_mlp_forward(hn.view({n, d()}), p.w1, p.b1, p.w2, p.u, p.b2).view(shape);
    // (Tensor::to converts dtypes on the host only: the cast op converts on the device.)
    const Tensor x = hn.dtype() == DType::F32 ? hn.view({n, d()}) : cast(hn.view({n, d()}), DType::F32);
    // The column of ones kept on the device per row count: a decode step then copies nothing
    // from the host, so it can be captured in a CUDA graph (models/infer/decode_graph.h).
    if (!device_ones_.defined() || device_ones_.size(0) != n || device_ones_.device() != hn.device()) {
      std::vector<float> one(static_cast<size_t>(n), 1.0f);
      device_ones_ = Tensor::from_vector<float>({n, 1}, one).to(hn.device());
    }
    return router_forward_ops(p, x, device_ones_).view(shape);
  }
  Tensor host = hn;
  Tensor x = host.dtype() == DType::F64 ? host.view({n, d()}) : host.view({n, d()}).to(DType::F64);
  Tensor y = router_forward(blocks[static_cast<size_t>(k)], x);
  Shape shape(hn.shape().begin(), hn.shape().end() - 1);
  y = y.view(shape);
  if (hn.dtype() != DType::F64) y = y.to(DType::F32);  // f32 statistics, as the LM head's
  return y;
}

void save_entropy_router(const std::string& path, const EntropyRouter& r) {
  AMOR_CHECK(!r.blocks.empty(), "save_entropy_router: '{}': no blocks", path);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t k = 0; k < r.blocks.size(); ++k) {
    const RouterParams& p = r.blocks[k];
    const std::string pre = "router." + std::to_string(k) + ".";
    tensors.emplace_back(pre + "fc1.weight", p.w1.to(DType::F32));
    tensors.emplace_back(pre + "fc1.bias", p.b1.to(DType::F32));
    tensors.emplace_back(pre + "fc2.weight", p.w2.to(DType::F32));
    tensors.emplace_back(pre + "fc2.bias", p.b2.to(DType::F32));
    tensors.emplace_back(pre + "skip.weight", p.u.to(DType::F32));
  }
  std::map<std::string, std::string> meta = r.metadata;
  meta["format"] = "amor-run entropy router";
  meta["blocks"] = std::to_string(r.blocks.size());
  meta["d_model"] = std::to_string(r.d());
  meta["width"] = std::to_string(r.width());
  save_safetensors(path, tensors, meta);  // temp file + fsync + rename (write_file_atomic)
}

EntropyRouter load_entropy_router(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  auto meta = [&](const std::string& key) -> std::string {
    auto it = f.metadata.find(key);
    AMOR_CHECK(it != f.metadata.end(), "{}: no '{}' metadata (not an amor-run entropy router file?)", path, key);
    return it->second;
  };
  AMOR_CHECK(meta("format") == "amor-run entropy router", "{}: format '{}', expected 'amor-run entropy router'",
             path, meta("format"));
  const int64_t K = std::stoll(meta("blocks")), d = std::stoll(meta("d_model")), W = std::stoll(meta("width"));
  AMOR_CHECK(K >= 1 && d >= 1 && W >= 1, "{}: blocks {}, d_model {}, width {} must be >= 1", path, K, d, W);
  AMOR_CHECK(static_cast<int64_t>(f.tensors.size()) == 5 * K, "{}: {} tensors, expected 5 per block ({})", path,
             f.tensors.size(), 5 * K);
  EntropyRouter r;
  r.metadata = f.metadata;
  auto get = [&](const std::string& name, const Shape& shape) {
    const Tensor* t = f.find(name);
    AMOR_CHECK(t, "{}: no tensor '{}'", path, name);
    AMOR_CHECK(t->shape() == shape, "{}: '{}' is {}, expected {} elements in shape {}", path, name,
               t->str(), Tensor::empty(shape, DType::F32).numel(), Tensor::empty(shape, DType::F32).str());
    return t->to(DType::F64);
  };
  for (int64_t k = 0; k < K; ++k) {
    const std::string pre = "router." + std::to_string(k) + ".";
    RouterParams p;
    p.w1 = get(pre + "fc1.weight", {W, d});
    p.b1 = get(pre + "fc1.bias", {W});
    p.w2 = get(pre + "fc2.weight", {1, W});
    p.b2 = get(pre + "fc2.bias", {1});
    p.u = get(pre + "skip.weight", {1, d});
    r.blocks.push_back(std::move(p));
  }
  return r;
}

}  // namespace amor::model
