// Tensor: a contiguous, row-major block of one dtype on one device, with a shape.
//
// Tensors share storage: copying a Tensor copies a handle, view() reinterprets the same memory
// with another shape, and slice_flat() views a contiguous range (how FSDP's flat parameter units
// hand out per-parameter views). There are no strides: every op reads contiguous memory, which is
// what both the CPU references and the CUDA kernels want. Memory comes from the device's
// CachingAllocator, so the buffers of one step are reused by the next.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/core/dtype.h"
#include "kernels/core/error.h"

namespace amor {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[2,3,4]"
int64_t shape_numel(const Shape& s);

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::CPU);
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::CPU);
  template <class T>
  static Tensor from_vector(const Shape& shape, const std::vector<T>& values);
  template <class T>
  static Tensor full(const Shape& shape, T value);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t i) const;  // negative i counts from the end
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_cpu() const { return device_ == Device::CPU; }

  void* raw_data() const;
  // Typed pointer; throws if T is not this tensor's dtype.
  template <class T>
  T* data() const;

  Tensor view(const Shape& shape) const;                        // same numel, shared storage
  Tensor slice_flat(int64_t offset, const Shape& shape) const;  // elements [offset, offset+numel)
  Tensor clone() const;
  Tensor to(Device d) const;   // copy to another device (a handle to this tensor if already there)
  Tensor to(DType t) const;    // CPU dtype conversion (float types and integers)
  void zero_();
  void copy_from(const Tensor& src);  // same shape and dtype; any devices

  // CPU only: element i of the flat tensor as double / set from double (tests, I/O).
  double item(int64_t i = 0) const;
  void set_item(int64_t i, double v);
  template <class T>
  std::vector<T> to_vector() const;

  // "f32[8,64]@cpu", or "undefined"
  std::string str() const;
  bool same_storage(const Tensor& other) const { return storage_ == other.storage_; }

 private:
  std::shared_ptr<void> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
};

template <class T>
T* Tensor::data() const {
  AMOR_CHECK(dtype_of<T> == dtype_, "Tensor::data<{}>() called on a {} tensor",
             dtype_name(dtype_of<T>), str());
  return static_cast<T*>(raw_data());
}

template <class T>
Tensor Tensor::from_vector(const Shape& shape, const std::vector<T>& values) {
  AMOR_CHECK(shape_numel(shape) == static_cast<int64_t>(values.size()),
             "Tensor::from_vector: shape {} holds {} elements but {} values were given",
             shape_str(shape), shape_numel(shape), values.size());
  Tensor t = empty(shape, dtype_of<T>, Device::CPU);
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

template <class T>
Tensor Tensor::full(const Shape& shape, T value) {
  Tensor t = empty(shape, dtype_of<T>, Device::CPU);
  std::fill(t.data<T>(), t.data<T>() + t.numel(), value);
  return t;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  AMOR_CHECK(is_cpu(), "Tensor::to_vector: tensor {} is not on the cpu", str());
  const T* p = data<T>();
  return std::vector<T>(p, p + numel_);
}

}  // namespace amor
