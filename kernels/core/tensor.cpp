#include "kernels/core/tensor.h"

#include <algorithm>
#include <cstring>

#include "kernels/core/backend.h"
#include "kernels/core/caching_allocator.h"

namespace amor {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    AMOR_CHECK(d >= 0, "Tensor::empty: negative dimension in shape {}", shape_str(shape));
  Tensor t;
  t.shape_ = shape;
  t.numel_ = shape_numel(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = allocator(device).allocate(t.nbytes());
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

int64_t Tensor::size(int64_t i) const {
  int64_t d = dim();
  int64_t j = i < 0 ? i + d : i;
  AMOR_CHECK(j >= 0 && j < d, "Tensor::size({}) out of range for {}", i, str());
  return shape_[static_cast<size_t>(j)];
}

void* Tensor::raw_data() const {
  AMOR_CHECK(defined(), "use of an undefined tensor");
  return static_cast<char*>(storage_.get()) + offset_bytes_;
}

Tensor Tensor::view(const Shape& shape) const {
  AMOR_CHECK(shape_numel(shape) == numel_, "Tensor::view: cannot view {} as {}", str(),
             shape_str(shape));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice_flat(int64_t offset, const Shape& shape) const {
  int64_t n = shape_numel(shape);
  AMOR_CHECK(offset >= 0 && offset + n <= numel_,
             "Tensor::slice_flat: elements [{}, {}) are outside {}", offset, offset + n, str());
  Tensor t = *this;
  t.offset_bytes_ += static_cast<size_t>(offset) * dtype_size(dtype_);
  t.shape_ = shape;
  t.numel_ = n;
  return t;
}

void Tensor::zero_() {
  if (numel_ == 0) return;
  backend(device_).memset_zero(raw_data(), nbytes());
}

void Tensor::copy_from(const Tensor& src) {
  AMOR_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_,
             "Tensor::copy_from: cannot copy {} into {}", src.str(), str());
  if (numel_ == 0) return;
  if (device_ == Device::CPU && src.device_ == Device::CPU) {
    std::memmove(raw_data(), src.raw_data(), nbytes());
  } else if (device_ == Device::CPU) {
    backend(src.device_).copy_to_host(raw_data(), src.raw_data(), nbytes());
  } else if (src.device_ == Device::CPU) {
    backend(device_).copy_from_host(raw_data(), src.raw_data(), nbytes());
  } else {
    backend(device_).copy_within(raw_data(), src.raw_data(), nbytes());
  }
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device d) const {
  if (d == device_) return *this;
  Tensor t = empty(shape_, dtype_, d);
  t.copy_from(*this);
  return t;
}

namespace {
template <class T>
double load(const void* p, int64_t i) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>)
    return static_cast<double>(static_cast<float>(static_cast<const T*>(p)[i]));
  else
    return static_cast<double>(static_cast<const T*>(p)[i]);
}
template <class T>
void store(void* p, int64_t i, double v) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>)
    static_cast<T*>(p)[i] = T(static_cast<float>(v));
  else
    static_cast<T*>(p)[i] = static_cast<T>(v);
}
template <class F>
void dispatch_any(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); break;
    case DType::F64: f(double{}); break;
    case DType::BF16: f(bf16{}); break;
    case DType::F16: f(f16{}); break;
    case DType::I32: f(int32_t{}); break;
    case DType::I64: f(int64_t{}); break;
    case DType::U8: f(uint8_t{}); break;
  }
}
}  // namespace

double Tensor::item(int64_t i) const {
  AMOR_CHECK(is_cpu(), "Tensor::item: tensor {} is not on the cpu", str());
  AMOR_CHECK(i >= 0 && i < numel_, "Tensor::item({}) out of range for {}", i, str());
  double v = 0;
  dispatch_any(dtype_, [&](auto tag) { v = load<decltype(tag)>(raw_data(), i); });
  return v;
}

void Tensor::set_item(int64_t i, double v) {
  AMOR_CHECK(is_cpu(), "Tensor::set_item: tensor {} is not on the cpu", str());
  AMOR_CHECK(i >= 0 && i < numel_, "Tensor::set_item({}) out of range for {}", i, str());
  dispatch_any(dtype_, [&](auto tag) { store<decltype(tag)>(raw_data(), i, v); });
}

Tensor Tensor::to(DType t) const {
  if (t == dtype_) return *this;
  AMOR_CHECK(is_cpu(), "Tensor::to({}): dtype conversion of {} needs a cpu tensor", dtype_name(t),
             str());
  Tensor out = empty(shape_, t, Device::CPU);
  const void* src = raw_data();
  void* dst = out.raw_data();
  dispatch_any(dtype_, [&](auto in_tag) {
    using In = decltype(in_tag);
    dispatch_any(t, [&](auto out_tag) {
      using Out = decltype(out_tag);
      for (int64_t i = 0; i < numel_; ++i) store<Out>(dst, i, load<In>(src, i));
    });
  });
  return out;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + "@" + device_name(device_);
}

}  // namespace amor
