// cuDNN's fused flash attention through the backend graph API (contract in attention_cudnn.h).
//
// Math (per batch b, query head h, kv head g = h / (H / Hkv), query i, key j <= i + Tk - Tq):
//   forward   S = scale q_i.k_j, lse_i = max_j S + log sum_j exp(S - max), o_i = sum_j P_ij v_j
//   backward  P = exp(S - lse), delta_i = dout_i.o_i, dV = P^T dout, dP = dout V^T,
//             dS = P (dP - delta) scale, dQ = dS K, dK = dS^T Q (dK, dV summed over g's heads)
// Tiling, memory traffic: cuDNN's (its Hopper flash kernels: q tiles of 128 rows in shared memory,
// k/v tiles streamed by TMA, S and P in registers; reads q, k, v once per q tile, writes o and lse
// once; the backward keeps a f32 dQ accumulator in global memory, B*H*Tq*D*4 bytes, and the
// delta rowsum, B*H*Tq*4 bytes, which we hand it as part of our workspace).
//
// Why a graph and not a call: cuDNN 9 has no "attention" function for bf16 training on 9.14 (the
// unified SDPA operation needs 9.17 for the backward); its fused flash engines are picked by
// pattern matching an operation graph. The graph below is cudnn-frontend's composite SDPA node
// (include/cudnn_frontend/node/scaled_dot_product_flash_attention.h, softmax.h and the causal
// mask of the score modifiers) rebuilt node by node: the same operations in the same order, the
// same virtual tensors and data types (bf16 io, f32 intermediates and compute, int32 indices,
// boolean masks), by-value scalars for the scale and the mask's fill value. Deviating from that
// pattern makes cuDNN answer NOT_SUPPORTED rather than pick a slower engine, which is what
// cudnn_attention_supported() reports.
//
// Layout: our [B,T,H,D] storage is cuDNN's [b,h,s,d] with strides (T*H*D, D, H*D, 1); K (and V in
// the backward) enter transposed, [b,h,d,s] with strides (T*H*D, D, 1, H*D): no copies.
//
// The CPU emulator (tests/cuda/emu) compiles this file with a host compiler and has no cuDNN; a
// build without cuDNN neither: both get the stand-in at the bottom (every shape unsupported).
#include "kernels/attention/attention_cudnn.h"

#if defined(__CUDACC__) && defined(AMOR_HAVE_CUDNN)
#include <cudnn_graph.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/core/cuda_check.h"

namespace amor::cuda {
namespace {

// How to get cuDNN's own account of a failure; appended to every message.
constexpr const char* kLogHint =
    " [cuDNN's own log: rerun with CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=stderr (cuDNN 9; "
    "older: CUDNN_LOGERR_DBG=1 CUDNN_LOGINFO_DBG=1 CUDNN_LOGDEST_DBG=stderr)]";

// A cuDNN call that failed: the status (NOT_SUPPORTED means "no engine for this graph") and a
// message naming the call, the descriptor and cuDNN's last error string.
struct Failure {
  cudnnStatus_t status;
  std::string what;
};

std::string status_text(cudnnStatus_t st) {
  std::string s = cudnnGetErrorString(st);
  char buf[1024] = {0};
  cudnnGetLastErrorString(buf, sizeof buf);
  if (buf[0]) s += std::string(" (cuDNN says: ") + buf + ")";
  return s;
}

void check(cudnnStatus_t st, const std::string& call) {
  if (st != CUDNN_STATUS_SUCCESS) throw Failure{st, call + " failed: " + status_text(st)};
}

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc(cudnnBackendDescriptorType_t type, std::string name) : name_(std::move(name)) {
    check(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor(" + name_ + ")");
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  const std::string& name() const { return name_; }

  Desc& set(cudnnBackendAttributeName_t a, const char* aname, cudnnBackendAttributeType_t t,
            int64_t count, const void* v) {
    check(cudnnBackendSetAttribute(d_, a, t, count, v),
          "cudnnBackendSetAttribute(" + name_ + ", " + aname + ")");
    return *this;
  }
  Desc& set_desc(cudnnBackendAttributeName_t a, const char* aname, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    return set(a, aname, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o);
  }
  void finalize() { check(cudnnBackendFinalize(d_), "cudnnBackendFinalize(" + name_ + ")"); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string name_;
};

#define AMOR_ATTR(a) a, #a

using Dims = std::array<int64_t, 4>;
constexpr cudnnDataType_t kBF16 = CUDNN_DATA_BFLOAT16;
constexpr cudnnDataType_t kF32 = CUDNN_DATA_FLOAT;
constexpr cudnnDataType_t kI32 = CUDNN_DATA_INT32;
constexpr cudnnDataType_t kBool = CUDNN_DATA_BOOLEAN;

// The caller's tensors (the variant pack's fixed uids).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kFirstInternal = 100 };

struct TensorInfo {
  cudnnDataType_t dt;
  Dims dim, stride;
  bool is_virtual;
  Desc* desc;
};

// An operation graph under construction: tensors by uid, the operations in order, the by-value
// scalars (host memory the variant pack points at, hence a deque: stable addresses).
class Graph {
 public:
  int64_t tensor(const std::string& name, cudnnDataType_t dt, Dims dim, Dims stride,
                 bool is_virtual, int64_t uid = 0, bool by_value = false) {
    if (uid == 0) uid = next_uid_++;
    Desc& d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + name);
    const int64_t align = 16;  // cudnn-frontend's default for every tensor
    const bool virt = is_virtual;
    d.set(AMOR_ATTR(CUDNN_ATTR_TENSOR_DATA_TYPE), CUDNN_TYPE_DATA_TYPE, 1, &dt)
        .set(AMOR_ATTR(CUDNN_ATTR_TENSOR_DIMENSIONS), CUDNN_TYPE_INT64, 4, dim.data())
        .set(AMOR_ATTR(CUDNN_ATTR_TENSOR_STRIDES), CUDNN_TYPE_INT64, 4, stride.data())
        .set(AMOR_ATTR(CUDNN_ATTR_TENSOR_UNIQUE_ID), CUDNN_TYPE_INT64, 1, &uid)
        .set(AMOR_ATTR(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT), CUDNN_TYPE_INT64, 1, &align)
        .set(AMOR_ATTR(CUDNN_ATTR_TENSOR_IS_VIRTUAL), CUDNN_TYPE_BOOLEAN, 1, &virt);
    if (by_value) {
      const bool yes = true;
      d.set(AMOR_ATTR(CUDNN_ATTR_TENSOR_IS_BY_VALUE), CUDNN_TYPE_BOOLEAN, 1, &yes);
    }
    d.finalize();
    tensors_[uid] = TensorInfo{dt, dim, stride, is_virtual, &d};
    return uid;
  }
  int64_t virt(const std::string& name, cudnnDataType_t dt, Dims dim, Dims stride) {
    return tensor(name, dt, dim, stride, true);
  }
  // A virtual tensor with uid's dims and strides.
  int64_t like(const std::string& name, cudnnDataType_t dt, int64_t uid) {
    const TensorInfo& t = info(uid);
    return virt(name, dt, t.dim, t.stride);
  }
  int64_t scalar_f32(const std::string& name, float v) {
    values_.push_back(Scalar{});
    values_.back().f = v;
    return scalar(name, kF32);
  }
  int64_t scalar_i32(const std::string& name, int32_t v) {
    values_.push_back(Scalar{});
    values_.back().i = v;
    return scalar(name, kI32);
  }

  void pointwise(const std::string& name, cudnnPointwiseMode_t mode, cudnnDataType_t compute,
                 int64_t x, int64_t b, int64_t t, int64_t y, int64_t axis = -1) {
    Desc& pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise " + name);
    pw.set(AMOR_ATTR(CUDNN_ATTR_POINTWISE_MODE), CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .set(AMOR_ATTR(CUDNN_ATTR_POINTWISE_MATH_PREC), CUDNN_TYPE_DATA_TYPE, 1, &compute);
    if (axis >= 0) pw.set(AMOR_ATTR(CUDNN_ATTR_POINTWISE_AXIS), CUDNN_TYPE_INT64, 1, &axis);
    pw.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "operation " + name);
    op.set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR), pw)
        .set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_XDESC), *info(x).desc);
    if (b) op.set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_BDESC), *info(b).desc);
    if (t) op.set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_TDESC), *info(t).desc);
    op.set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_YDESC), *info(y).desc);
    add_op(op);
  }
  // Unary / binary shorthands.
  void pw1(const std::string& name, cudnnPointwiseMode_t mode, int64_t x, int64_t y,
           cudnnDataType_t compute = kF32) {
    pointwise(name, mode, compute, x, 0, 0, y);
  }
  void pw2(const std::string& name, cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t y,
           cudnnDataType_t compute = kF32) {
    pointwise(name, mode, compute, x, b, 0, y);
  }

  // c = a @ b (batched over the leading dims; GQA broadcasts b's heads). The overrides (uids of
  // int32 [B,1,1,1] tensors, 0 for none) give the per-batch valid m/n/k, as the frontend's
  // padding mask does.
  void matmul(const std::string& name, int64_t a, int64_t b, int64_t c, int64_t m_ov = 0,
              int64_t n_ov = 0, int64_t k_ov = 0) {
    Desc& mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul " + name);
    const cudnnDataType_t comp = kF32;
    mm.set(AMOR_ATTR(CUDNN_ATTR_MATMUL_COMP_TYPE), CUDNN_TYPE_DATA_TYPE, 1, &comp);
    mm.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "operation " + name);
    op.set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_MATMUL_ADESC), *info(a).desc)
        .set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_MATMUL_BDESC), *info(b).desc)
        .set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_MATMUL_CDESC), *info(c).desc)
        .set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_MATMUL_DESC), mm);
    if (m_ov)
      op.set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC), *info(m_ov).desc);
    if (n_ov)
      op.set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC), *info(n_ov).desc);
    if (k_ov)
      op.set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC), *info(k_ov).desc);
    add_op(op);
  }

  void reduction(const std::string& name, cudnnReduceTensorOp_t mode, int64_t x, int64_t y) {
    Desc& rd = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction " + name);
    const cudnnDataType_t comp = kF32;
    rd.set(AMOR_ATTR(CUDNN_ATTR_REDUCTION_OPERATOR), CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode)
        .set(AMOR_ATTR(CUDNN_ATTR_REDUCTION_COMP_TYPE), CUDNN_TYPE_DATA_TYPE, 1, &comp);
    rd.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "operation " + name);
    op.set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_XDESC), *info(x).desc)
        .set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_YDESC), *info(y).desc)
        .set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_DESC), rd);
    add_op(op);
  }

  void reshape(const std::string& name, int64_t x, int64_t y) {
    Desc& op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "operation " + name);
    op.set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_RESHAPE_XDESC), *info(x).desc)
        .set_desc(AMOR_ATTR(CUDNN_ATTR_OPERATION_RESHAPE_YDESC), *info(y).desc);
    add_op(op);
  }

  const TensorInfo& info(int64_t uid) const { return tensors_.at(uid); }
  const std::vector<cudnnBackendDescriptor_t>& ops() const { return ops_; }
  // The by-value scalars: uid -> host address (part of every variant pack).
  const std::vector<std::pair<int64_t, const void*>>& by_value() const { return by_value_; }

  Desc& make(cudnnBackendDescriptorType_t type, const std::string& name) {
    descs_.push_back(std::make_unique<Desc>(type, name));
    return *descs_.back();
  }

 private:
  union Scalar {
    float f;
    int32_t i;
  };
  int64_t scalar(const std::string& name, cudnnDataType_t dt) {
    const int64_t uid =
        tensor(name, dt, Dims{1, 1, 1, 1}, Dims{1, 1, 1, 1}, false, 0, /*by_value=*/true);
    by_value_.emplace_back(uid, static_cast<const void*>(&values_.back()));
    return uid;
  }
  void add_op(Desc& op) {
    op.finalize();
    ops_.push_back(op.get());
  }

  std::vector<std::unique_ptr<Desc>> descs_;
  std::map<int64_t, TensorInfo> tensors_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::deque<Scalar> values_;
  std::vector<std::pair<int64_t, const void*>> by_value_;
  int64_t next_uid_ = kFirstInternal;
};

// The storage [B,T,Hh,D] as cuDNN's [b,h,s,d], and transposed as [b,h,d,s].
Dims bhsd_dims(int64_t B, int64_t Hh, int64_t S, int64_t D) { return {B, Hh, S, D}; }
Dims bhsd_strides(int64_t Hh, int64_t S, int64_t D) { return {S * Hh * D, D, Hh * D, 1}; }
Dims bhds_dims(int64_t B, int64_t Hh, int64_t S, int64_t D) { return {B, Hh, D, S}; }
Dims bhds_strides(int64_t Hh, int64_t S, int64_t D) { return {S * Hh * D, D, 1, Hh * D}; }

// Per-row statistics [B,H,Tq,1], and the score matrix [B,H,Tq,Tk] and its transpose.
Dims row_dims(const CudnnAttnShape& n) { return {n.B, n.H, n.Tq, 1}; }
Dims row_strides(const CudnnAttnShape& n) { return {n.H * n.Tq, n.Tq, 1, 1}; }
Dims score_dims(const CudnnAttnShape& n) { return {n.B, n.H, n.Tq, n.Tk}; }
Dims score_strides(const CudnnAttnShape& n) { return {n.H * n.Tq * n.Tk, n.Tq * n.Tk, n.Tk, 1}; }
Dims score_t_dims(const CudnnAttnShape& n) { return {n.B, n.H, n.Tk, n.Tq}; }
Dims score_t_strides(const CudnnAttnShape& n) { return {n.H * n.Tq * n.Tk, n.Tq * n.Tk, 1, n.Tk}; }

// The frontend's causal mask (sliding_window_mask with right bound 0): keep S[i][j] where
// row >= col, the row shifted by Tk - Tq when the queries are the last Tq positions (its
// BOTTOM_RIGHT alignment, with the per-batch length tensors when a padding mask is in the graph);
// elsewhere the lowest float. Returns the masked scores.
int64_t causal_mask(Graph& g, int64_t s, const CudnnAttnShape& n, int64_t seq_q, int64_t seq_kv) {
  int64_t row = g.like("gen_row_index", kI32, s);
  g.pointwise("gen_row_index", CUDNN_POINTWISE_GEN_INDEX, kF32, s, 0, 0, row, 2);
  const int64_t col = g.like("gen_col_index", kI32, s);
  g.pointwise("gen_col_index", CUDNN_POINTWISE_GEN_INDEX, kF32, s, 0, 0, col, 3);
  if (n.Tq != n.Tk) {
    const int64_t skv = seq_kv ? seq_kv : g.scalar_i32("s_kv", static_cast<int32_t>(n.Tk));
    const int64_t r1 = g.like("row_idx_add_skv", kI32, row);
    g.pw2("row_idx_add_skv", CUDNN_POINTWISE_ADD, row, skv, r1, kI32);
    const int64_t sq = seq_q ? seq_q : g.scalar_i32("s_q", static_cast<int32_t>(n.Tq));
    const int64_t r2 = g.like("row_idx_add_skv_sub_sq", kI32, row);
    g.pw2("row_idx_add_skv_sub_sq", CUDNN_POINTWISE_SUB, r1, sq, r2, kI32);
    row = r2;
  }
  const int64_t mask = g.like("row_greater_than_col", kBool, s);
  g.pw2("row_greater_than_col", CUDNN_POINTWISE_CMP_GE, row, col, mask, kBool);
  const int64_t lowest = g.scalar_f32("causal_fill", std::numeric_limits<float>::lowest());
  const int64_t out = g.like("binary_select", kF32, s);
  g.pointwise("binary_select", CUDNN_POINTWISE_BINARY_SELECT, kF32, s, lowest, mask, out);
  return out;
}

// The frontend's padding mask: keep S[i][j] where i < seq_q[b] and j < seq_kv[b].
int64_t padding_mask(Graph& g, int64_t s, int64_t seq_q, int64_t seq_kv) {
  const int64_t row = g.like("gen_row_idx_padding", kI32, s);
  g.pointwise("gen_row_idx_padding", CUDNN_POINTWISE_GEN_INDEX, kI32, s, 0, 0, row, 2);
  const int64_t col = g.like("gen_col_idx_padding", kI32, s);
  g.pointwise("gen_col_idx_padding", CUDNN_POINTWISE_GEN_INDEX, kI32, s, 0, 0, col, 3);
  const int64_t rm = g.like("lt_row_sq_padding", kBool, s);
  g.pw2("lt_row_sq_padding", CUDNN_POINTWISE_CMP_LT, row, seq_q, rm, kBool);
  const int64_t cm = g.like("lt_col_skv_padding", kBool, s);
  g.pw2("lt_col_skv_padding", CUDNN_POINTWISE_CMP_LT, col, seq_kv, cm, kBool);
  const int64_t both = g.like("and_row_col_padding", kBool, s);
  g.pw2("and_row_col_padding", CUDNN_POINTWISE_LOGICAL_AND, rm, cm, both, kBool);
  const int64_t lowest = g.scalar_f32("padding_fill", std::numeric_limits<float>::lowest());
  const int64_t out = g.like("select_padding", kF32, s);
  g.pointwise("select_padding", CUDNN_POINTWISE_BINARY_SELECT, kF32, s, lowest, both, out);
  return out;
}

// The frontend's CompositeSDPANode with causal mask and stats (generate_stats = true), bf16.
void build_forward(Graph& g, const CudnnAttnShape& n, float scale) {
  const int64_t q =
      g.tensor("Q", kBF16, bhsd_dims(n.B, n.H, n.Tq, n.D), bhsd_strides(n.H, n.Tq, n.D), false, kQ);
  const int64_t kt = g.tensor("K", kBF16, bhds_dims(n.B, n.Hkv, n.Tk, n.D),
                              bhds_strides(n.Hkv, n.Tk, n.D), false, kK);
  const int64_t v = g.tensor("V", kBF16, bhsd_dims(n.B, n.Hkv, n.Tk, n.D),
                             bhsd_strides(n.Hkv, n.Tk, n.D), false, kV);
  const int64_t o =
      g.tensor("O", kBF16, bhsd_dims(n.B, n.H, n.Tq, n.D), bhsd_strides(n.H, n.Tq, n.D), false, kO);
  const int64_t stats = g.tensor("Stats", kF32, row_dims(n), row_strides(n), false, kStats);

  const int64_t s1 = g.virt("bmm1::C", kF32, score_dims(n), score_strides(n));
  g.matmul("bmm1", q, kt, s1);
  const int64_t sc = g.scalar_f32("attn_scale", scale);
  const int64_t s2 = g.like("attn_scale::OUT_0", kF32, s1);
  g.pw2("attn_scale", CUDNN_POINTWISE_MUL, s1, sc, s2);
  const int64_t s3 = causal_mask(g, s2, n, 0, 0);

  // Softmax with stats (CompositeSoftmaxNode): max, sub, exp, sum, log, add, div.
  const int64_t mx = g.virt("Max", kF32, row_dims(n), row_strides(n));
  g.reduction("Max", CUDNN_REDUCE_TENSOR_MAX, s3, mx);
  const int64_t sub = g.like("sub_M", kF32, s3);
  g.pw2("sub", CUDNN_POINTWISE_SUB, s3, mx, sub);
  const int64_t e = g.like("exp_sub_M", kF32, s3);
  g.pw1("exp", CUDNN_POINTWISE_EXP, sub, e);
  const int64_t sum = g.virt("SumExp", kF32, row_dims(n), row_strides(n));
  g.reduction("sum", CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const int64_t lg = g.virt("log::OUT_0", kF32, row_dims(n), row_strides(n));
  g.pw1("log", CUDNN_POINTWISE_LOG, sum, lg);
  g.pw2("add", CUDNN_POINTWISE_ADD, mx, lg, stats);
  // bmm2's A operand has the io type (the frontend sets it before bmm2).
  const int64_t p = g.like("softmax::S", kBF16, s3);
  g.pw2("div", CUDNN_POINTWISE_DIV, e, sum, p);
  g.matmul("bmm2", p, v, o);
}

// What the backward needs beyond the caller's tensors: the f32 workspace tensors (uid, byte
// offset in our extra workspace) and, for the padding-mask workaround, int32 length tensors.
struct BackwardExtras {
  int64_t softmax_sum = 0, dq_accum = 0, seq_q = 0, seq_kv = 0;
  size_t softmax_sum_bytes = 0, dq_accum_bytes = 0;
};

// cudnn-frontend applies a padding mask with the full lengths to the backward when Tk % 128 != 0
// on cuDNN <= 9.15 (a backend bug otherwise: CompositeSDPABackwardNode::pre_validate_node_derived).
bool backward_needs_padding_workaround(const CudnnAttnShape& n) {
  return n.Tk % 128 != 0 && cudnnGetVersion() <= 91500;
}

// Whether the backward graph carries that workaround: the version's answer, or forced either way
// (cudnn_attention_check_descriptors builds both on this machine, whose cuDNN may be newer).
enum class Padding { ByVersion, On, Off };

// The frontend's CompositeSDPABackwardNode (causal, no dropout/bias, dQ accumulated in f32: the
// path cuDNN >= 9.0 takes on Hopper), bf16.
BackwardExtras build_backward(Graph& g, const CudnnAttnShape& n, float scale,
                              Padding padding = Padding::ByVersion) {
  BackwardExtras x;
  const int64_t q =
      g.tensor("Q", kBF16, bhsd_dims(n.B, n.H, n.Tq, n.D), bhsd_strides(n.H, n.Tq, n.D), false, kQ);
  const int64_t kt = g.tensor("K", kBF16, bhds_dims(n.B, n.Hkv, n.Tk, n.D),
                              bhds_strides(n.Hkv, n.Tk, n.D), false, kK);
  const int64_t vt = g.tensor("V", kBF16, bhds_dims(n.B, n.Hkv, n.Tk, n.D),
                              bhds_strides(n.Hkv, n.Tk, n.D), false, kV);
  const int64_t o =
      g.tensor("O", kBF16, bhsd_dims(n.B, n.H, n.Tq, n.D), bhsd_strides(n.H, n.Tq, n.D), false, kO);
  const int64_t dout = g.tensor("dO", kBF16, bhsd_dims(n.B, n.H, n.Tq, n.D),
                                bhsd_strides(n.H, n.Tq, n.D), false, kDO);
  const int64_t stats = g.tensor("Stats", kF32, row_dims(n), row_strides(n), false, kStats);
  const int64_t dq = g.tensor("dQ", kBF16, bhsd_dims(n.B, n.H, n.Tq, n.D),
                              bhsd_strides(n.H, n.Tq, n.D), false, kDQ);
  const int64_t dk = g.tensor("dK", kBF16, bhsd_dims(n.B, n.Hkv, n.Tk, n.D),
                              bhsd_strides(n.Hkv, n.Tk, n.D), false, kDK);
  const int64_t dv = g.tensor("dV", kBF16, bhsd_dims(n.B, n.Hkv, n.Tk, n.D),
                              bhsd_strides(n.Hkv, n.Tk, n.D), false, kDV);
  const int64_t one = g.scalar_f32("one", 1.0f);
  const int64_t sc = g.scalar_f32("attn_scale", scale);
  if (padding == Padding::On ||
      (padding == Padding::ByVersion && backward_needs_padding_workaround(n))) {
    x.seq_q = g.tensor("workaround_padding_mask_seq_len_q", kI32, Dims{n.B, 1, 1, 1},
                       Dims{1, 1, 1, 1}, false);
    x.seq_kv = g.tensor("workaround_padding_mask_seq_len_kv", kI32, Dims{n.B, 1, 1, 1},
                        Dims{1, 1, 1, 1}, false);
  }

  // softmax_sum = rowsum(dO * O) * 1 (a non-virtual f32 tensor: our workspace).
  const int64_t doo = g.virt("mul_dO_O::OUT_0", kF32, Dims{n.B, n.H, n.Tq, n.D},
                             Dims{n.H * n.Tq * n.D, n.Tq * n.D, n.H * n.D, 1});
  g.pw2("mul_dO_O", CUDNN_POINTWISE_MUL, dout, o, doo);
  const int64_t red = g.virt("reduce_dO_o::Y", kF32, row_dims(n), row_strides(n));
  g.reduction("reduce_dO_o", CUDNN_REDUCE_TENSOR_ADD, doo, red);
  x.softmax_sum = g.tensor("softmax_sum", kF32, row_dims(n), row_strides(n), false);
  x.softmax_sum_bytes = static_cast<size_t>(n.B * n.H * n.Tq) * sizeof(float);
  g.pw2("scale_dropout_inv", CUDNN_POINTWISE_MUL, red, one, x.softmax_sum);

  // P = exp(scale Q K^T - stats), masked; dV = P^T dO.
  const int64_t s = g.virt("matmul_Q_KT::C", kF32, score_dims(n), score_strides(n));
  g.matmul("matmul_Q_KT", q, kt, s, x.seq_q, x.seq_kv, 0);
  int64_t last = g.like("mul_s_attn_scale::OUT_0", kF32, s);
  g.pw2("mul_s_attn_scale", CUDNN_POINTWISE_MUL, s, sc, last);
  const int64_t sub = g.like("sub_s_m::OUT_0", kF32, s);
  g.pw2("sub_s_m", CUDNN_POINTWISE_SUB, last, stats, sub);
  last = sub;
  if (x.seq_q) last = padding_mask(g, last, x.seq_q, x.seq_kv);
  last = causal_mask(g, last, n, x.seq_q, x.seq_kv);
  const int64_t p = g.like("exp_s::OUT_0", kF32, s);
  g.pw1("exp_s", CUDNN_POINTWISE_EXP, last, p);
  const int64_t pt = g.virt("reshape_p::Y", kBF16, score_t_dims(n), score_t_strides(n));
  g.reshape("reshape_p", p, pt);
  if (n.H == n.Hkv) {
    g.matmul("matmul_pT_dO", pt, dout, dv, x.seq_kv, 0, x.seq_q);
  } else {
    const int64_t full = g.virt("dV_fullhead", kBF16, Dims{n.B, n.H, n.Tk, n.D},
                                Dims{n.H * n.Tk * n.D, n.Tk * n.D, n.D, 1});
    g.matmul("matmul_pT_dO", pt, dout, full, x.seq_kv, 0, x.seq_q);
    g.reduction("red_dV_head", CUDNN_REDUCE_TENSOR_ADD, full, dv);
  }

  // dS = P (dO V^T - softmax_sum) scale; dK = dS^T Q.
  const int64_t dp = g.virt("matmul_dO_VT::C", kF32, score_dims(n), score_strides(n));
  g.matmul("matmul_dO_VT", dout, vt, dp, x.seq_q, x.seq_kv, 0);
  const int64_t t1 = g.like("sub_dP_softmax_sum::OUT_0", kF32, dp);
  g.pw2("sub_dP_softmax_sum", CUDNN_POINTWISE_SUB, dp, x.softmax_sum, t1);
  const int64_t t2 = g.like("mul_dP_exp_s::OUT_0", kF32, dp);
  g.pw2("mul_dP_exp_s", CUDNN_POINTWISE_MUL, t1, p, t2);
  const int64_t ds = g.like("mul_dS_attn_scale::OUT_0", kF32, dp);
  g.pw2("mul_dS_attn_scale", CUDNN_POINTWISE_MUL, t2, sc, ds);
  const int64_t dst = g.virt("reshape_dS::Y", kBF16, score_t_dims(n), score_t_strides(n));
  g.reshape("reshape_dS", ds, dst);
  if (n.H == n.Hkv) {
    g.matmul("matmul_dST_Q", dst, q, dk, x.seq_kv, 0, x.seq_q);
  } else {
    const int64_t full = g.virt("dK_fullhead", kBF16, Dims{n.B, n.H, n.Tk, n.D},
                                Dims{n.H * n.Tk * n.D, n.Tk * n.D, n.D, 1});
    g.matmul("matmul_dST_Q", dst, q, full, x.seq_kv, 0, x.seq_q);
    g.reduction("red_dK_head", CUDNN_REDUCE_TENSOR_ADD, full, dk);
  }

  // dQ = dS K, accumulated in f32 (non-virtual: our workspace), then cast to bf16. The reshaped
  // K is a virtual tensor of the intermediate type, as in the frontend.
  const int64_t kr = g.virt("reshape_k::Y", kF32, bhsd_dims(n.B, n.Hkv, n.Tk, n.D),
                            bhsd_strides(n.Hkv, n.Tk, n.D));
  g.reshape("reshape_k", kt, kr);
  x.dq_accum = g.tensor("dQ_accum", kF32, Dims{n.B, n.H, n.Tq, n.D},
                        Dims{n.H * n.Tq * n.D, n.Tq * n.D, n.D, 1}, false);
  x.dq_accum_bytes = static_cast<size_t>(n.B * n.H * n.Tq * n.D) * sizeof(float);
  g.matmul("matmul_dS_K", ds, kr, x.dq_accum, x.seq_q, 0, x.seq_kv);
  g.pw1("identity_dQ", CUDNN_POINTWISE_IDENTITY, x.dq_accum, dq);
  return x;
}

size_t align_up(size_t x) { return (x + 255) / 256 * 256; }

// A built plan: the graph's descriptors (alive as long as the plan), the execution plan, and
// where the extra workspace tensors live.
struct Plan {
  Graph g;
  std::unique_ptr<Desc> graph, plan;
  std::vector<std::unique_ptr<Desc>> configs;
  int64_t plan_workspace = 0;
  BackwardExtras extras;
  int32_t* seq_lens = nullptr;  // device [2*B]: Tq then Tk per batch (padding workaround only)
  std::string engine;           // which config won, for the log

  size_t workspace_bytes() const {
    return align_up(static_cast<size_t>(plan_workspace)) + align_up(extras.softmax_sum_bytes) +
           align_up(extras.dq_accum_bytes);
  }
};

std::string shape_text(const CudnnAttnShape& n, float scale, bool backward) {
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "cuDNN attention %s (B %lld Tq %lld Tk %lld H %lld Hkv %lld D %lld scale %g, cuDNN %lld)",
      backward ? "backward" : "forward", static_cast<long long>(n.B), static_cast<long long>(n.Tq),
      static_cast<long long>(n.Tk), static_cast<long long>(n.H), static_cast<long long>(n.Hkv),
      static_cast<long long>(n.D), static_cast<double>(scale),
      static_cast<long long>(cudnnGetVersion()));
  return buf;
}

// The shapes this path takes at all (before asking cuDNN): bf16 is implied by the caller.
std::string precheck(const CudnnAttnShape& n) {
  if (n.D != 64 && n.D != 128) return "head dim " + std::to_string(n.D) + " is not 64 or 128";
  if (n.Tq > n.Tk) return "Tq > Tk";
  if (n.Hkv < 1 || n.H % n.Hkv != 0) return "H is not a multiple of Hkv";
  if (n.B < 1 || n.Tq < 1) return "empty batch or sequence";
  // cuDNN's descriptors and its flash kernels index with int32.
  if (n.B * n.H * n.Tq * n.Tk >= (int64_t{1} << 62) || n.Tk > (int64_t{1} << 30))
    return "sequence too long";
  if (cudnnGetVersion() < 90600)
    return "cuDNN " + std::to_string(cudnnGetVersion()) +
           " is older than 9.6 (needs the "
           "frontend's dQ memset and other workarounds this graph does not replicate)";
  return "";
}

cudnnHandle_t handle_for_current_device() {
  static std::mutex mu;
  static std::map<int, cudnnHandle_t> handles;
  int dev = 0;
  AMOR_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles.find(dev);
  if (it != handles.end()) return it->second;
  cudnnHandle_t h = nullptr;
  check(cudnnCreate(&h), "cudnnCreate (device " + std::to_string(dev) + ")");
  handles[dev] = h;
  return h;
}

// ", engine N": cuDNN's global index of the config's engine (best effort, for the logs).
std::string engine_index_text(const Desc& cfg) {
  cudnnBackendDescriptor_t engine = nullptr;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) !=
      CUDNN_STATUS_SUCCESS)
    return "";
  int64_t got = 0, index = -1;
  std::string text;
  if (cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                               &engine) == CUDNN_STATUS_SUCCESS &&
      cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got,
                               &index) == CUDNN_STATUS_SUCCESS)
    text = ", engine " + std::to_string(index);
  cudnnBackendDestroyDescriptor(engine);
  return text;
}

// Builds the operation graph and the first execution plan cuDNN's heuristics (mode A, then the
// fallback list) offers that finalizes. Throws Failure.
std::unique_ptr<Plan> build_plan(const CudnnAttnShape& n, float scale, bool backward) {
  const std::string pre = precheck(n);
  if (!pre.empty()) throw Failure{CUDNN_STATUS_NOT_SUPPORTED, pre};
  cudnnHandle_t handle = handle_for_current_device();
  auto p = std::make_unique<Plan>();
  if (backward)
    p->extras = build_backward(p->g, n, scale);
  else
    build_forward(p->g, n, scale);

  p->graph = std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  const auto& ops = p->g.ops();
  p->graph->set(AMOR_ATTR(CUDNN_ATTR_OPERATIONGRAPH_HANDLE), CUDNN_TYPE_HANDLE, 1, &handle)
      .set(AMOR_ATTR(CUDNN_ATTR_OPERATIONGRAPH_OPS), CUDNN_TYPE_BACKEND_DESCRIPTOR,
           static_cast<int64_t>(ops.size()), ops.data());
  p->graph->finalize();

  std::string tried;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const char* mode_name = mode == CUDNN_HEUR_MODE_A ? "heuristics mode A" : "fallback heuristics";
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, mode_name);
    heur.set_desc(AMOR_ATTR(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH), *p->graph)
        .set(AMOR_ATTR(CUDNN_ATTR_ENGINEHEUR_MODE), CUDNN_TYPE_HEUR_MODE, 1, &mode);
    try {
      heur.finalize();
    } catch (const Failure& f) {
      tried += std::string("; ") + f.what;
      continue;
    }
    int64_t count = 0;
    check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
          std::string("cudnnBackendGetAttribute(") + mode_name + " results count)");
    if (count == 0) {
      tried += std::string("; ") + mode_name + ": no engine configs";
      continue;
    }
    std::vector<std::unique_ptr<Desc>> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      cfgs.push_back(
          std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                 std::string(mode_name) + " config " + std::to_string(i)));
      raw.push_back(cfgs.back()->get());
    }
    int64_t got = 0;
    check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
          std::string("cudnnBackendGetAttribute(") + mode_name + " results)");
    for (int64_t i = 0; i < got; ++i) {
      try {
        auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                           "execution plan (" + cfgs[i]->name() + ")");
        plan->set(AMOR_ATTR(CUDNN_ATTR_EXECUTION_PLAN_HANDLE), CUDNN_TYPE_HANDLE, 1, &handle)
            .set_desc(AMOR_ATTR(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG), *cfgs[i]);
        plan->finalize();
        int64_t ws = 0, wgot = 0;
        check(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                       CUDNN_TYPE_INT64, 1, &wgot, &ws),
              "cudnnBackendGetAttribute(execution plan workspace size)");
        p->plan = std::move(plan);
        p->plan_workspace = ws;
        p->engine = cfgs[i]->name() + engine_index_text(*cfgs[i]);
        p->configs = std::move(cfgs);
        break;
      } catch (const Failure& f) {
        tried += std::string("; ") + f.what;
      }
    }
    if (p->plan) break;
  }
  if (!p->plan)
    throw Failure{CUDNN_STATUS_NOT_SUPPORTED,
                  "no engine of cuDNN's heuristics built a plan for this graph" + tried};

  if (p->extras.seq_q) {  // the lengths never change: written once, next to the plan
    std::vector<int32_t> lens(2 * static_cast<size_t>(n.B));
    for (int64_t b = 0; b < n.B; ++b) {
      lens[b] = static_cast<int32_t>(n.Tq);
      lens[n.B + b] = static_cast<int32_t>(n.Tk);
    }
    AMOR_CUDA_CHECK(cudaMalloc(&p->seq_lens, lens.size() * sizeof(int32_t)));
    AMOR_CUDA_CHECK(cudaMemcpy(p->seq_lens, lens.data(), lens.size() * sizeof(int32_t),
                               cudaMemcpyHostToDevice));
  }
  return p;
}

using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t, bool>;

struct Cache {
  std::mutex mu;
  std::map<Key, std::unique_ptr<Plan>> plans;
  std::map<Key, std::string> failures;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: plans outlive static destruction order issues
  return *c;
}

Key key_of(const CudnnAttnShape& n, float scale, bool backward) {
  int dev = 0;
  AMOR_CUDA_CHECK(cudaGetDevice(&dev));
  uint32_t bits = 0;
  std::memcpy(&bits, &scale, sizeof bits);
  return Key{dev, n.B, n.Tq, n.Tk, n.H, n.Hkv, n.D, bits, backward};
}

// The cached plan, built on first use; null with *why set when cuDNN cannot build it.
Plan* find_or_build(const CudnnAttnShape& n, float scale, bool backward, std::string* why) {
  Cache& c = cache();
  const Key key = key_of(n, scale, backward);
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.plans.find(key);
  if (it != c.plans.end()) return it->second.get();
  auto f = c.failures.find(key);
  if (f != c.failures.end()) {
    *why = f->second;
    return nullptr;
  }
  try {
    auto plan = build_plan(n, scale, backward);
    Plan* raw = plan.get();
    if (std::getenv("AMOR_CUDNN_VERBOSE"))
      std::fprintf(stderr, "amor: %s: plan from %s, workspace %lld bytes\n",
                   shape_text(n, scale, backward).c_str(), raw->engine.c_str(),
                   static_cast<long long>(raw->workspace_bytes()));
    c.plans[key] = std::move(plan);
    return raw;
  } catch (const Failure& e) {
    *why = shape_text(n, scale, backward) + ": " + e.what + kLogHint;
  } catch (const std::exception& e) {
    *why = shape_text(n, scale, backward) + ": " + e.what() + kLogHint;
  }
  c.failures[key] = *why;
  std::fprintf(stderr, "amor: %s; using our attention kernels for this shape\n", why->c_str());
  return nullptr;
}

Plan& plan_or_fail(const CudnnAttnShape& n, float scale, bool backward) {
  std::string why;
  Plan* p = find_or_build(n, scale, backward, &why);
  if (!p) cudnn_attention_fail(why);
  return *p;
}

void execute(Plan& p, const CudnnAttnShape& n, float scale, bool backward,
             std::vector<std::pair<int64_t, void*>> io, void* workspace, cudaStream_t s) {
  char* ws = static_cast<char*>(workspace);
  char* extra = ws + align_up(static_cast<size_t>(p.plan_workspace));
  if (p.extras.softmax_sum) io.emplace_back(p.extras.softmax_sum, extra);
  if (p.extras.dq_accum)
    io.emplace_back(p.extras.dq_accum, extra + align_up(p.extras.softmax_sum_bytes));
  if (p.extras.seq_q) {
    io.emplace_back(p.extras.seq_q, p.seq_lens);
    io.emplace_back(p.extras.seq_kv, p.seq_lens + n.B);
  }
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  for (auto& [uid, ptr] : io) uids.push_back(uid), ptrs.push_back(ptr);
  for (const auto& [uid, ptr] : p.g.by_value())
    uids.push_back(uid), ptrs.push_back(const_cast<void*>(ptr));
  try {
    cudnnHandle_t handle = handle_for_current_device();
    // Stream 0 is the per-thread default stream here (kernels/CMakeLists.txt); cuDNN would read
    // it as the legacy NULL stream.
    check(cudnnSetStream(handle, s ? s : cudaStreamPerThread), "cudnnSetStream");
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    void* wsp = p.plan_workspace > 0 ? workspace : nullptr;
    pack.set(AMOR_ATTR(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS), CUDNN_TYPE_INT64,
             static_cast<int64_t>(uids.size()), uids.data())
        .set(AMOR_ATTR(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS), CUDNN_TYPE_VOID_PTR,
             static_cast<int64_t>(ptrs.size()), ptrs.data())
        .set(AMOR_ATTR(CUDNN_ATTR_VARIANT_PACK_WORKSPACE), CUDNN_TYPE_VOID_PTR, 1, &wsp);
    pack.finalize();
    check(cudnnBackendExecute(handle, p.plan->get(), pack.get()),
          "cudnnBackendExecute(" + p.engine + ")");
  } catch (const Failure& f) {
    cudnn_attention_fail(shape_text(n, scale, backward) + ": " + f.what + kLogHint);
  }
}

}  // namespace

bool cudnn_attention_built() { return true; }

int64_t cudnn_attention_version() { return static_cast<int64_t>(cudnnGetVersion()); }

bool cudnn_attention_supported(const CudnnAttnShape& n, float scale, bool backward) {
  try {
    std::string why;
    return find_or_build(n, scale, backward, &why) != nullptr;
  } catch (...) {  // e.g. no device: never throws
    return false;
  }
}

std::string cudnn_attention_unsupported_reason(const CudnnAttnShape& n, float scale,
                                               bool backward) {
  try {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    auto f = c.failures.find(key_of(n, scale, backward));
    return f == c.failures.end() ? std::string() : f->second;
  } catch (...) {
    return "cuDNN attention: no CUDA device";
  }
}

size_t cudnn_attention_workspace_bytes(const CudnnAttnShape& n, float scale, bool backward) {
  return plan_or_fail(n, scale, backward).workspace_bytes();
}

void cudnn_attention_forward(const void* q, const void* k, const void* v, float scale, void* o,
                             float* lse, void* workspace, const CudnnAttnShape& n, cudaStream_t s) {
  Plan& p = plan_or_fail(n, scale, false);
  execute(p, n, scale, false,
          {{kQ, const_cast<void*>(q)},
           {kK, const_cast<void*>(k)},
           {kV, const_cast<void*>(v)},
           {kO, o},
           {kStats, lse}},
          workspace, s);
}

void cudnn_attention_backward(const void* q, const void* k, const void* v, const void* o,
                              const float* lse, const void* dout, float scale, void* dq, void* dk,
                              void* dv, void* workspace, const CudnnAttnShape& n, cudaStream_t s) {
  Plan& p = plan_or_fail(n, scale, true);
  execute(p, n, scale, true,
          {{kQ, const_cast<void*>(q)},
           {kK, const_cast<void*>(k)},
           {kV, const_cast<void*>(v)},
           {kO, const_cast<void*>(o)},
           {kStats, const_cast<float*>(lse)},
           {kDO, const_cast<void*>(dout)},
           {kDQ, dq},
           {kDK, dk},
           {kDV, dv}},
          workspace, s);
}

int cudnn_attention_check_descriptors(const CudnnAttnShape& n, float scale, bool backward) {
  try {
    Graph g;
    if (!backward) {
      build_forward(g, n, scale);
      return static_cast<int>(g.ops().size());
    }
    build_backward(g, n, scale, Padding::Off);
    Graph padded;  // the padding-mask variant cuDNN <= 9.15 gets when Tk % 128 != 0
    build_backward(padded, n, scale, Padding::On);
    return static_cast<int>(padded.ops().size());
  } catch (const Failure& f) {
    cudnn_attention_fail(shape_text(n, scale, backward) + ": " + f.what + kLogHint);
  }
}

}  // namespace amor::cuda

#else  // no cuDNN in this build (or the CPU emulator): every shape unsupported

namespace amor::cuda {

namespace {
constexpr const char* kNoCudnn =
    "cuDNN attention: this build has no cuDNN (CMake did not find it, or this is the CPU "
    "emulator)";
}

bool cudnn_attention_built() { return false; }
int64_t cudnn_attention_version() { return 0; }
bool cudnn_attention_supported(const CudnnAttnShape&, float, bool) { return false; }
std::string cudnn_attention_unsupported_reason(const CudnnAttnShape&, float, bool) {
  return kNoCudnn;
}
size_t cudnn_attention_workspace_bytes(const CudnnAttnShape&, float, bool) {
  cudnn_attention_fail(kNoCudnn);
}
void cudnn_attention_forward(const void*, const void*, const void*, float, void*, float*, void*,
                             const CudnnAttnShape&, cudaStream_t) {
  cudnn_attention_fail(kNoCudnn);
}
void cudnn_attention_backward(const void*, const void*, const void*, const void*, const float*,
                              const void*, float, void*, void*, void*, void*, const CudnnAttnShape&,
                              cudaStream_t) {
  cudnn_attention_fail(kNoCudnn);
}
int cudnn_attention_check_descriptors(const CudnnAttnShape&, float, bool) {
  cudnn_attention_fail(kNoCudnn);
}

}  // namespace amor::cuda

#endif
