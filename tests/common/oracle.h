// Cases for the independent PyTorch oracle (tests/torch_oracle.py).
//
// Each op registers a function that writes cases: for each case a folder holding meta.json (op,
// dtype, scalar parameters) and .npy files:
//   in_<name>.npy    inputs the op was given
//   out_<name>.npy   outputs our op computed
//   dout_<name>.npy  the upstream gradient we handed the backward for that output
//   grad_<name>.npy  the gradient our backward returned for input <name>
// The Python side recomputes every output and gradient with torch autograd from the inputs and
// the parameters, and compares (double: rel. 1e-10, float: 1e-5). The oracle's formulas live in
// tests/oracle/<op>.py, written from the papers, not from our C++.
//
// Register with
//   AMOR_ORACLE(rmsnorm) { auto c = w.add_case("rmsnorm", "plain_f64", DType::F64); ... }
// in a file compiled into the oracle_dump executable (each op's CMakeLists appends its
// *_oracle.cpp to the AMOR_ORACLE_SOURCES global property).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/core/tensor.h"

namespace amor::testing {

class OracleCase {
 public:
  OracleCase(std::string dir, std::string op, std::string name, DType dtype);
  ~OracleCase();  // writes meta.json
  OracleCase(const OracleCase&) = delete;
  OracleCase& operator=(const OracleCase&) = delete;

  OracleCase& param(const std::string& key, double v);
  OracleCase& param(const std::string& key, int64_t v);
  OracleCase& param(const std::string& key, int v) { return param(key, static_cast<int64_t>(v)); }
  OracleCase& param(const std::string& key, bool v);
  OracleCase& param(const std::string& key, const std::string& v);
  OracleCase& input(const std::string& name, const Tensor& t);
  OracleCase& output(const std::string& name, const Tensor& t);
  OracleCase& grad_out(const std::string& name, const Tensor& t);
  OracleCase& grad_in(const std::string& name, const Tensor& t);

 private:
  void save(const std::string& file, const Tensor& t);
  std::string dir_, op_, name_;
  DType dtype_;
  std::vector<std::pair<std::string, std::string>> params_;  // key -> JSON literal
  std::vector<std::string> inputs_, outputs_, grad_outs_, grad_ins_;
};

class OracleWriter {
 public:
  explicit OracleWriter(std::string root) : root_(std::move(root)) {}
  // A new case folder <root>/<op>__<name>; the case is written when the pointer is dropped.
  std::unique_ptr<OracleCase> add_case(const std::string& op, const std::string& name, DType dtype);
  int cases() const { return count_; }

 private:
  std::string root_;
  int count_ = 0;
};

using OracleFn = void (*)(OracleWriter&);
std::map<std::string, OracleFn>& oracle_registry();
struct OracleRegistrar {
  OracleRegistrar(const char* op, OracleFn fn) { oracle_registry()[op] = fn; }
};

// Writes a CPU tensor as a NumPy .npy file (f32, f64, i32, i64, u8; bf16/f16 as their f32 values).
void write_npy(const std::string& path, const Tensor& t);

}  // namespace amor::testing

#define AMOR_ORACLE(op)                                                                  \
  static void amor_oracle_##op(::amor::testing::OracleWriter& w);                        \
  static ::amor::testing::OracleRegistrar amor_oracle_reg_##op(#op, amor_oracle_##op);   \
  static void amor_oracle_##op(::amor::testing::OracleWriter& w)
