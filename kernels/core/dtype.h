// Element types and devices of a Tensor, and the 16-bit float formats the CUDA path stores.
//
// bf16 and f16 are plain storage types here: the CPU reference computes in float or double and
// converts at the edges. Conversions round to nearest even, as CUDA's __float2bfloat16_rn does,
// so a tensor moved between CPU and GPU is bit-identical.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace amor {

enum class DType : uint8_t { F32, BF16, F16, F64, I32, I64, U8 };
enum class Device : uint8_t { CPU, CUDA };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
const char* device_name(Device d);
bool is_floating(DType t);

struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet and a NaN
      bits = static_cast<uint16_t>((u >> 16) | 0x40u);
      return;
    }
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
    bits = static_cast<uint16_t>((u + rounding) >> 16);
  }
  explicit operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f);
  explicit operator float() const;
};

template <class T> struct dtype_of_t;
template <> struct dtype_of_t<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of_t<double> { static constexpr DType value = DType::F64; };
template <> struct dtype_of_t<bf16> { static constexpr DType value = DType::BF16; };
template <> struct dtype_of_t<f16> { static constexpr DType value = DType::F16; };
template <> struct dtype_of_t<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of_t<int64_t> { static constexpr DType value = DType::I64; };
template <> struct dtype_of_t<uint8_t> { static constexpr DType value = DType::U8; };
template <class T> inline constexpr DType dtype_of = dtype_of_t<T>::value;

}  // namespace amor
