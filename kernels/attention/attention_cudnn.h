// cuDNN's fused flash attention (the "runtime fusion" SDPA engines of cuDNN 9, built through the
// backend graph API) for the dense bf16 path of kernels/attention: on Hopper these are wgmma/TMA
// kernels, about twice as fast as our mma.sync kernels. Same contract as attention_cuda.h without
// the gate: q [B,Tq,H,D], k/v [B,Tk,Hkv,D], o [B,Tq,H,D] bf16; lse [B,H,Tq] f32 (natural log of
// sum exp(scale q.k) over the causal keys: exactly cuDNN's softmax "Stats"); causal with the
// queries the last Tq <= Tk positions (cuDNN's bottom-right diagonal when Tq < Tk); dk, dv summed
// over each kv head's query heads. Not bitwise deterministic (cuDNN accumulates dq with atomics).
//
// Every pointer is a 16-byte aligned device pointer (the descriptors declare 16-byte alignment).
// The graph is cuDNN-frontend's composite SDPA node, rebuilt node by node on the C backend API
// (attention_cudnn_cuda.cu says how and why). Plans are built once per (device, shape, scale,
// pass) and cached; the caller passes the workspace (from the caching allocator).
//
// Without cuDNN (CMake did not find it, or the CPU emulator compiles the file with a host
// compiler) every shape is unsupported and forward/backward throw.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace amor::cuda {

struct CudnnAttnShape {
  int64_t B, Tq, Tk, H, Hkv, D;
};

// Whether this build has the cuDNN path compiled in (cuDNN found at configure time, nvcc build).
bool cudnn_attention_built();

// Whether cuDNN builds an execution plan for this shape and pass (forward, or backward). Tries to
// build the plan (and caches both the plan and the answer); never throws. The first "no" for a
// shape prints why to stderr, once.
bool cudnn_attention_supported(const CudnnAttnShape& n, float scale, bool backward);

// Why cudnn_attention_supported() said no for this shape and pass ("" when it said yes, or has
// not been asked).
std::string cudnn_attention_unsupported_reason(const CudnnAttnShape& n, float scale, bool backward);

// Device scratch a call needs (cuDNN's plan workspace, plus the backward's f32 dq accumulator
// and rowsum(dout * o)); the caller allocates it (from the caching allocator: no cudaMalloc in a
// steady-state step). Builds the plan if needed; throws amor::Error when it cannot be built.
size_t cudnn_attention_workspace_bytes(const CudnnAttnShape& n, float scale, bool backward);

// o and lse from q, k, v (bf16; lse f32). workspace: cudnn_attention_workspace_bytes(.., false)
// bytes, 256-byte aligned. Throws amor::Error when the plan cannot be built or cuDNN fails.
void cudnn_attention_forward(const void* q, const void* k, const void* v, float scale, void* o,
                             float* lse, void* workspace, const CudnnAttnShape& n,
                             cudaStream_t s = 0);

// dq, dk, dv from the forward's o and lse and dout (bf16, lse f32); workspace as above (true).
void cudnn_attention_backward(const void* q, const void* k, const void* v, const void* o,
                              const float* lse, const void* dout, float scale, void* dq, void* dk,
                              void* dv, void* workspace, const CudnnAttnShape& n,
                              cudaStream_t s = 0);

// Builds and finalizes every tensor and operation descriptor of the forward or backward graph and
// stops before the operation graph (which needs a cuDNN handle, hence a GPU): the check this
// machine can do without one. Returns the number of operations; throws amor::Error naming the
// descriptor cuDNN rejected.
int cudnn_attention_check_descriptors(const CudnnAttnShape& n, float scale, bool backward);

// cudnnGetVersion() of the library in use (e.g. 91400), 0 without cuDNN.
int64_t cudnn_attention_version();

// Throws amor::Error(what). Defined in attention.cpp: nvcc cannot compile fmt (error.h), so the
// .cu reports through this.
[[noreturn]] void cudnn_attention_fail(const std::string& what);

}  // namespace amor::cuda
