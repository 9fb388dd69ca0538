#include "kernels/core/dtype.h"

#include <cmath>

#include "kernels/core/error.h"

namespace amor {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::F64: return 8;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  throw Error("dtype_size: unknown dtype");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::F64: return "f64";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
  }
  return "?";
}

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

bool is_floating(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::BF16 || t == DType::F16;
}

// IEEE binary16 <-> binary32, round to nearest even, with subnormals, infinities and NaN.
f16::f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) { bits = static_cast<uint16_t>(sign | 0x7e00u); return; }   // NaN
  if (mag >= 0x477ff000u) { bits = static_cast<uint16_t>(sign | 0x7c00u); return; }  // overflow -> inf
  if (mag < 0x38800000u) {  // result is subnormal (or zero) in half
    if (mag < 0x33000000u) { bits = static_cast<uint16_t>(sign); return; }  // rounds to zero
    int e = static_cast<int>(mag >> 23);
    uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    int shift = 126 - e;  // bits to drop so that the unit is 2^-24
    uint32_t half = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    bits = static_cast<uint16_t>(sign | half);
    return;
  }
  uint32_t h = ((mag >> 13) - (112u << 10));
  uint32_t rem = mag & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  bits = static_cast<uint16_t>(sign | h);
}

f16::operator float() const {
  uint32_t sign = (static_cast<uint32_t>(bits) & 0x8000u) << 16;
  uint32_t e = (bits >> 10) & 0x1fu;
  uint32_t m = bits & 0x3ffu;
  uint32_t out;
  if (e == 0) {
    if (m == 0) {
      out = sign;
    } else {  // subnormal: value = m * 2^-24
      float v = std::ldexp(static_cast<float>(m), -24);
      std::memcpy(&out, &v, 4);
      out |= sign;
    }
  } else if (e == 31) {
    out = sign | 0x7f800000u | (m << 13);
  } else {
    out = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

}  // namespace amor
