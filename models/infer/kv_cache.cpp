#include "models/infer/kv_cache.h"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "kernels/attention/attention.h"
#include "kernels/core/check.h"
#include "kernels/core/env_switch.h"
#include "kernels/core/error.h"
#include "kernels/kv_append/kv_append.h"
#include "kernels/rope/rope.h"

namespace amor::model {

namespace {
std::atomic<bool> step_path_on_cpu{false};
// -1: not yet read from AMOR_KV_STEP_PATH (on unless it is 0); else 0 / 1.
std::atomic<int> step_path_gpu{-1};
}  // namespace

void KvCache::use_step_path_on_cpu(bool on) { step_path_on_cpu = on; }

bool KvCache::read_step_path_switch() { return env_choice("AMOR_KV_STEP_PATH", {"0", "1"}, "1") == "1"; }

std::string kv_step_path_off_blocker(const std::string& kind) {
  return fmt::format("model.kind '{}' has attention, whose decode step captures only on the KV caches' "
                     "step path, which AMOR_KV_STEP_PATH=0 switches off (unset it, or set 1, to capture)",
                     kind);
}

bool KvCache::step_path_on_gpu() {
  int v = step_path_gpu.load();
  if (v < 0) {
    v = read_step_path_switch() ? 1 : 0;
    int expected = -1;
    if (!step_path_gpu.compare_exchange_strong(expected, v)) v = expected;  // another thread set it
  }
  return v == 1;
}

void KvCache::use_step_path_on_gpu(bool on) { step_path_gpu = on ? 1 : 0; }

bool KvCache::step_path(int64_t T) const {
  return T == 1 && !lengths_.empty() && (device_ != Device::CPU ? step_path_on_gpu() : step_path_on_cpu.load());
}

const Tensor& KvCache::device_lengths() const {
  const char* op = "KvCache::device_lengths";
  AMOR_CHECK(!lengths_.empty(), "{}: the cache holds no token yet (its first append fixes the layout)", op);
  const int64_t B = sequences();
  if (!device_lengths_.defined() || device_lengths_.numel() != B || device_lengths_.device() != device_) {
    device_lengths_ = Tensor::empty({B}, DType::I32, device_);
    device_lengths_current_ = false;
  }
  if (!device_lengths_current_) {
    std::vector<int32_t> host(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = lengths_[static_cast<size_t>(b)];
      AMOR_CHECK(n <= int64_t(0x7fffffff), "{}: sequence {} holds {} tokens, more than i32 lengths hold", op, b, n);
      host[static_cast<size_t>(b)] = static_cast<int32_t>(n);
    }
    device_lengths_.copy_from(Tensor::from_vector<int32_t>({B}, host));
    device_lengths_current_ = true;
  }
  return device_lengths_;
}

void KvCache::replayed(int64_t T) {
  AMOR_CHECK(T == 1, "KvCache::replayed: a replayed step appends one token per sequence, not {}", T);
  AMOR_CHECK(has_room(T) && device_lengths_current_,
             "KvCache::replayed: the cache ({} sequences, capacity {}, longest {}) could not have "
             "taken a replayed step (no room, or device lengths out of date)",
             sequences(), capacity_, longest());
  for (int64_t& n : lengths_) n += T;
}

bool KvCache::has_room(int64_t T) const { return !lengths_.empty() && longest() + T <= capacity_; }

void KvCache::graph_signature(std::vector<uintptr_t>& out) const {
  out.push_back(reinterpret_cast<uintptr_t>(k_.defined() ? k_.raw_data() : nullptr));
  out.push_back(reinterpret_cast<uintptr_t>(v_.defined() ? v_.raw_data() : nullptr));
  out.push_back(reinterpret_cast<uintptr_t>(device_lengths_.defined() ? device_lengths_.raw_data() : nullptr));
  out.push_back(static_cast<uintptr_t>(capacity_));
  out.push_back(static_cast<uintptr_t>(sequences()));
}

Tensor KvCache::rotate_next(const Tensor& x, double base) const {
  if (step_path(x.size(1))) return rope_forward_lengths(x, device_lengths(), base);
  return rope_forward_at(x, next_positions(x.size(1)), base);
}

Tensor rope_forward_at(const Tensor& x, const NextPositions& at, double base) {
  return at.per_sequence.defined() ? rope_forward_positions(x, at.per_sequence, base)
                                   : rope_forward(x, at.offset, base);
}

int64_t KvCache::length(int64_t b) const {
  AMOR_CHECK(b >= 0 && b < sequences(), "KvCache::length: sequence {} of {}", b, sequences());
  return lengths_[static_cast<size_t>(b)];
}

bool KvCache::uniform() const {
  return std::all_of(lengths_.begin(), lengths_.end(), [&](int64_t n) { return n == lengths_.front(); });
}

int64_t KvCache::longest() const {
  return lengths_.empty() ? 0 : *std::max_element(lengths_.begin(), lengths_.end());
}

NextPositions KvCache::next_positions(int64_t T) const {
  NextPositions at;
  if (uniform()) {
    at.offset = lengths_.empty() ? 0 : lengths_.front();
    return at;
  }
  const int64_t B = sequences();
  at.per_sequence = Tensor::empty({B, T}, DType::I64);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) at.per_sequence.data<int64_t>()[b * T + t] = lengths_[static_cast<size_t>(b)] + t;
  return at;
}

Tensor KvCache::row(const Tensor& t, int64_t b) const {
  return t.slice_flat(b * capacity_ * heads_ * dim_, {1, length(b), heads_, dim_});
}

void KvCache::copy_sequence(const KvCache& from, int64_t fb, Tensor& k, Tensor& v, int64_t b, int64_t capacity) {
  const int64_t row = from.heads_ * from.dim_, n = from.length(fb) * row;
  if (n == 0) return;
  k.slice_flat(b * capacity * row, {n}).copy_from(from.k_.slice_flat(fb * from.capacity_ * row, {n}));
  v.slice_flat(b * capacity * row, {n}).copy_from(from.v_.slice_flat(fb * from.capacity_ * row, {n}));
}

void KvCache::reserve(int64_t capacity) {
  if (capacity <= capacity_) return;
  const int64_t B = sequences();
  Tensor k = Tensor::empty({B, capacity, heads_, dim_}, dtype_, device_);
  Tensor v = Tensor::empty({B, capacity, heads_, dim_}, dtype_, device_);
  for (int64_t b = 0; b < B; ++b) copy_sequence(*this, b, k, v, b, capacity);
  k_ = k;
  v_ = v;
  capacity_ = capacity;
}

void KvCache::reserve_tokens(int64_t tokens) {
  AMOR_CHECK(tokens >= 0, "KvCache::reserve_tokens: {} tokens", tokens);
  if (lengths_.empty())
    planned_ = std::max(planned_, tokens);
  else
    reserve(tokens);
}

void KvCache::make_room(int64_t T) {
  if (capacity_ == 0 && planned_ > 0) reserve(std::max(planned_, T));
  if (longest() + T > capacity_) reserve(std::max({longest() + T, 2 * capacity_, int64_t{16}}));
}

void KvCache::append(const Tensor& k, const Tensor& v) {
  const char* op = "KvCache::append";
  check_dim(op, "k", k, 4);
  check_shape(op, "v", v, k.shape());
  const int64_t B = k.size(0), T = k.size(1);
  const bool step = step_path(T);  // decided before the first append fixes the layout
  if (lengths_.empty()) {  // the first append fixes the layout
    lengths_.assign(static_cast<size_t>(B), 0);
    heads_ = k.size(2);
    dim_ = k.size(3);
    dtype_ = k.dtype();
    device_ = k.device();
  }
  AMOR_CHECK(B == sequences() && k.size(2) == heads_ && k.size(3) == dim_ && k.dtype() == dtype_,
             "{}: k is {}, the cache holds {} sequences of [{},{}] {} keys", op, k.str(), sequences(),
             heads_, dim_, dtype_name(dtype_));
  if (step) {
    make_room(1);
    kv_append_step(k_, v_, k, v, device_lengths());
    for (int64_t& L : lengths_) ++L;  // the host mirror (the kernel advanced the device lengths)
    return;
  }
  device_lengths_current_ = false;
  make_room(T);
  const int64_t n = T * heads_ * dim_;
  for (int64_t b = 0; b < B; ++b) {
    int64_t& L = lengths_[static_cast<size_t>(b)];
    const int64_t at = (b * capacity_ + L) * heads_ * dim_;
    k_.slice_flat(at, {n}).copy_from(k.slice_flat(b * n, {n}));
    v_.slice_flat(at, {n}).copy_from(v.slice_flat(b * n, {n}));
    L += T;
  }
}

Tensor KvCache::append_qkv_step(const Tensor& qkv, int64_t q_heads, double base) {
  const char* op = "KvCache::append_qkv_step";
  check_dim(op, "qkv", qkv, 3);
  AMOR_CHECK(step_path(qkv.size(1)),
             "{}: qkv is {}; the fused step takes one token per sequence on the step path, with the "
             "cache holding tokens already",
             op, qkv.str());
  AMOR_CHECK(qkv.size(0) == sequences(), "{}: qkv is {}, but the cache holds {} sequences", op, qkv.str(),
             sequences());
  make_room(1);
  Tensor q = kv_rope_append_step(qkv, q_heads, k_, v_, device_lengths(), base);
  for (int64_t& L : lengths_) ++L;  // the host mirror (the kernel advanced the device lengths)
  return q;
}

void KvCache::append_rows(KvCache& other) {
  const char* op = "KvCache::append_rows";
  if (other.lengths_.empty()) return;
  if (lengths_.empty()) {
    *this = std::move(other);
    other = KvCache();
    return;
  }
  AMOR_CHECK(other.heads_ == heads_ && other.dim_ == dim_ && other.dtype_ == dtype_ && other.device_ == device_,
             "{}: joining caches of [{},{}] {} and [{},{}] {} keys", op, heads_, dim_, dtype_name(dtype_),
             other.heads_, other.dim_, dtype_name(other.dtype_));
  const int64_t B0 = sequences(), B = B0 + other.sequences();
  const int64_t capacity = std::max(capacity_, other.capacity_);
  Tensor k = Tensor::empty({B, capacity, heads_, dim_}, dtype_, device_);
  Tensor v = Tensor::empty({B, capacity, heads_, dim_}, dtype_, device_);
  for (int64_t b = 0; b < B; ++b) copy_sequence(b < B0 ? *this : other, b < B0 ? b : b - B0, k, v, b, capacity);
  lengths_.insert(lengths_.end(), other.lengths_.begin(), other.lengths_.end());
  device_lengths_current_ = false;  // reallocated for the new count at the next step
  planned_ = std::max(planned_, other.planned_);
  k_ = k;
  v_ = v;
  capacity_ = capacity;
  other = KvCache();
}

Tensor KvCache::attend(const Tensor& q, const Tensor& gate, const std::vector<int64_t>* only) const {
  const char* op = "KvCache::attend";
  check_dim(op, "q", q, 4);
  const int64_t B = q.size(0), Tq = q.size(1), H = q.size(2), D = q.size(3);
  AMOR_CHECK(B == sequences(), "{}: q is {}, but the cache holds {} sequences", op, q.str(), sequences());
  for (int64_t b = 0; b < B; ++b)
    AMOR_CHECK(Tq <= length(b),
               "{}: q is {}, but sequence {} of the cache holds {} tokens (queries are the last "
               "positions of the cache)",
               op, q.str(), b, length(b));
  if (gate.defined()) check_shape(op, "gate", gate, {B, Tq});
  if (only)
    for (size_t i = 0; i < only->size(); ++i)
      AMOR_CHECK((*only)[i] >= 0 && (*only)[i] < B && (i == 0 || (*only)[i] > (*only)[i - 1]),
                 "{}: sequences must be sorted, distinct and below {}", op, B);
  // Every sequence listed (at batch 1, any AMOR step that fires): the same as none, without
  // zeroing an output that every sequence then overwrites.
  if (only && only->size() == static_cast<size_t>(B)) only = nullptr;
  // The step path: every sequence in one launch over the storage, at the device lengths.
  if (!only && step_path(Tq)) return attention_forward_cache(q, k_, v_, device_lengths(), gate).o;
  if (B == 1 && !only) return attention_forward(q, keys(0), values(0), gate).o;
  Tensor o = only ? Tensor::zeros(q.shape(), q.dtype(), q.device()) : Tensor::empty(q.shape(), q.dtype(), q.device());
  const int64_t n = Tq * H * D;
  const size_t count = only ? only->size() : static_cast<size_t>(B);
  for (size_t i = 0; i < count; ++i) {
    const int64_t b = only ? (*only)[i] : static_cast<int64_t>(i);
    Tensor g = gate.defined() ? gate.slice_flat(b * Tq, {1, Tq}) : Tensor();
    Tensor ob = attention_forward(q.slice_flat(b * n, {1, Tq, H, D}), keys(b), values(b), g).o;
    o.slice_flat(b * n, {1, Tq, H, D}).copy_from(ob);
  }
  return o;
}

}  // namespace amor::model
