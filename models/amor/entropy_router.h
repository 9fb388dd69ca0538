// The fitted entropy router (AMOR paper, "fitted router"): per AMOR block, a small MLP that
// predicts the normalised entropy H the block's gate would compute from the tied LM head, from the
// block's normed input hn (the tensor its attention reads), so that at inference the gate need not
// run the [V x d] LM head per block:
//
//   r(x) = w2 · SiLU(W1 x + b1) + b2 + u · x          x = hn_t [d], width W (default 512)
//   gate_t = 1[r(hn_t) > tau]                          tau: the block's frozen EMA threshold
//
// Fitted after training with the backbone and blocks frozen (`amor-run fit-router`,
// runner/app/fit_router.h): targets are the LM-head gate's own entropies on the run's data, loss
// the mean squared error, AdamW. Used outside training only (AmorModel::set_entropy_router):
// training always gates on the LM head.
//
// Plain CPU code in double (matrix products through gemm_cpu); the forward and backward are
// checked against finite differences (entropy_router_test). predict() accepts hn on any device
// and dtype: on the CPU computed in double, on the GPU in f32 with the tensor ops (with
// a decode step's few rows by one op, kernels/router_mlp, unless AMOR_ROUTER_OP=0; on by default
// since its kernels passed on the GPU machine, session 15).
//
// File (safetensors, written atomically): per block k
//   router.{k}.fc1.weight [W, d]   router.{k}.fc1.bias [W]
//   router.{k}.fc2.weight [1, W]   router.{k}.fc2.bias [1]   router.{k}.skip.weight [1, d]
// in f32, metadata format = "amor-run entropy router", blocks, d_model, width, and whatever the
// caller adds (the fit's statistics).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/core/tensor.h"

namespace amor::model {

// One block's router, f64 CPU tensors.
struct RouterParams {
  Tensor w1;  // [W, d]
  Tensor b1;  // [W]
  Tensor w2;  // [1, W]
  Tensor b2;  // [1]
  Tensor u;   // [1, d] (the linear skip)
  int64_t d() const { return w1.size(1); }
  int64_t width() const { return w1.size(0); }
  std::vector<Tensor*> all() { return {&w1, &b1, &w2, &b2, &u}; }
  std::vector<const Tensor*> all() const { return {&w1, &b1, &w2, &b2, &u}; }
};

// W1 ~ U(±1/sqrt(d)), b1 ~ U(±1/sqrt(d)) (nn.Linear's default), w2 ~ U(±1/sqrt(W)), b2 = bias,
// u = 0.
RouterParams router_init(int64_t d, int64_t width, uint64_t seed, double bias = 0.0);

// What the backward needs: the input and the pre-activation.
struct RouterSaved {
  Tensor x;  // [n, d]
  Tensor a;  // [n, W] = x W1^T + b1
};

// x f64 [n, d] -> y f64 [n]; saved (optional) keeps what router_backward needs.
Tensor router_forward(const RouterParams& p, const Tensor& x, RouterSaved* saved = nullptr);

// dy f64 [n] -> the parameters' gradients (same shapes as p) and, when dx is given, dL/dx [n, d].
RouterParams router_backward(const RouterParams& p, const RouterSaved& saved, const Tensor& dy,
                             Tensor* dx = nullptr);

struct RouterFitOptions {
  int64_t steps = 2000;
  int64_t batch = 256;
  double lr = 1e-3;
  double weight_decay = 0.01;  // AdamW, on W1, w2 and u (not the biases)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  uint64_t seed = 0;
};

// Fits p to targets h [n] from inputs x [n, d] (f64 CPU) by AdamW on the mean squared error over
// minibatches drawn with replacement (seeded). Returns the MSE over all n after the last step.
double router_fit(RouterParams& p, const Tensor& x, const Tensor& h, const RouterFitOptions& options);

// The mean squared error of p on (x, h).
double router_mse(const RouterParams& p, const Tensor& x, const Tensor& h);

// The same r(x) through the tensor ops (linear, silu, add), on whatever device x is: what predict
// runs on the GPU, so the decode step's gate does not copy hn to the host. p's tensors must have
// x's dtype and device (router_params_to); the biases enter as rank-1 products with a column of
// ones (the ops have no broadcast add): `ones` [n, 1] in x's dtype on x's device, or undefined to
// make one from the host for this call. x [n, d] -> [n].
Tensor router_forward_ops(const RouterParams& p, const Tensor& x, const Tensor& ones = Tensor());
RouterParams router_params_to(const RouterParams& p, DType dtype, Device device);

// Every block's router, with the file's metadata.
struct EntropyRouter {
  std::vector<RouterParams> blocks;
  std::map<std::string, std::string> metadata;

  int64_t d() const { return blocks.empty() ? 0 : blocks[0].d(); }
  int64_t width() const { return blocks.empty() ? 0 : blocks[0].width(); }
  // hn [B,T,d] (or [N,d]) of block k, any device and float dtype -> the predicted entropies,
  // hn's shape without the last dimension, on hn's device, f64 for f64 hn and f32 otherwise (as
  // the LM head's entropies on cuda). On the CPU in f64 (router_forward, the reference); on the
  // GPU in f32 with the parameters copied there once: up to kRouterMlpMaxRows rows (a decode
  // step) by router_mlp_forward (two launches, hn read in its own dtype; AMOR_ROUTER_OP=0 goes
  // back to the tensor ops), otherwise (and for more rows) through
  // router_forward_ops with the column of ones kept there per row count; either way a decode step
  // copies nothing from the host (capturable in a CUDA graph: models/infer/decode_graph.h) (within 1e-5 of
  // the f64 values: entropy_router_test), so a token whose r(hn) sits that close to tau may gate
  // the other way than on the CPU.
  Tensor predict(int64_t k, const Tensor& hn) const;
  // AMOR_ROUTER_OP read now, through env_choice (unset, "" or 1: the op for a decode step's rows,
  // 0: the tensor ops, anything else an error naming the variable); predict reads it once per
  // process.
  static bool read_router_op_switch();

 private:
  mutable std::vector<RouterParams> device_blocks_;  // f32 copies on device_ (predict on the GPU)
  mutable Device device_ = Device::CPU;
  mutable Tensor device_ones_;  // f32 [n, 1] on device_ for the last row count n (predict on the GPU)
};

// Writes the router atomically (temp file + rename); metadata is added to the file's.
void save_entropy_router(const std::string& path, const EntropyRouter& router);
// Reads and checks a router file (names, shapes, consistent d and width); errors name the file.
EntropyRouter load_entropy_router(const std::string& path);

}  // namespace amor::model
