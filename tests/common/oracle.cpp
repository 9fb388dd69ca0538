#include "tests/common/oracle.h"

#include <filesystem>
#include <fstream>

namespace amor::testing {

namespace fs = std::filesystem;

std::map<std::string, OracleFn>& oracle_registry() {
  static std::map<std::string, OracleFn> registry;
  return registry;
}

void write_npy(const std::string& path, const Tensor& t0) {
  Tensor t = t0.to(Device::CPU);
  if (t.dtype() == DType::BF16 || t.dtype() == DType::F16) t = t.to(DType::F32);
  const char* descr = nullptr;
  switch (t.dtype()) {
    case DType::F32: descr = "<f4"; break;
    case DType::F64: descr = "<f8"; break;
    case DType::I32: descr = "<i4"; break;
    case DType::I64: descr = "<i8"; break;
    case DType::U8: descr = "|u1"; break;
    default: throw Error("write_npy: unsupported dtype " + t.str());
  }
  std::string shape = "(";
  for (int64_t d : t.shape()) shape += std::to_string(d) + ",";
  shape += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " +
                       shape + ", }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64
  // and ended by a newline, as the .npy format 1.0 requires.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  AMOR_CHECK(f.good(), "write_npy: cannot open {} for writing", path);
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  f.put(static_cast<char>(len & 0xff));
  f.put(static_cast<char>(len >> 8));
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
  AMOR_CHECK(f.good(), "write_npy: write to {} failed", path);
}

OracleCase::OracleCase(std::string dir, std::string op, std::string name, DType dtype)
    : dir_(std::move(dir)), op_(std::move(op)), name_(std::move(name)), dtype_(dtype) {
  fs::create_directories(dir_);
}

OracleCase& OracleCase::param(const std::string& key, double v) {
  params_.emplace_back(key, fmt::format("{:.17g}", v));
  return *this;
}
OracleCase& OracleCase::param(const std::string& key, int64_t v) {
  params_.emplace_back(key, std::to_string(v));
  return *this;
}
OracleCase& OracleCase::param(const std::string& key, bool v) {
  params_.emplace_back(key, v ? "true" : "false");
  return *this;
}
OracleCase& OracleCase::param(const std::string& key, const std::string& v) {
  params_.emplace_back(key, "\"" + v + "\"");
  return *this;
}

void OracleCase::save(const std::string& file, const Tensor& t) { write_npy(dir_ + "/" + file, t); }

OracleCase& OracleCase::input(const std::string& n, const Tensor& t) {
  save("in_" + n + ".npy", t);
  inputs_.push_back(n);
  return *this;
}
OracleCase& OracleCase::output(const std::string& n, const Tensor& t) {
  save("out_" + n + ".npy", t);
  outputs_.push_back(n);
  return *this;
}
OracleCase& OracleCase::grad_out(const std::string& n, const Tensor& t) {
  save("dout_" + n + ".npy", t);
  grad_outs_.push_back(n);
  return *this;
}
OracleCase& OracleCase::grad_in(const std::string& n, const Tensor& t) {
  save("grad_" + n + ".npy", t);
  grad_ins_.push_back(n);
  return *this;
}

static std::string json_list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", \"" : "\"") + v[i] + "\"";
  return s + "]";
}

OracleCase::~OracleCase() {
  std::ofstream f(dir_ + "/meta.json");
  f << "{\n  \"op\": \"" << op_ << "\",\n  \"name\": \"" << name_ << "\",\n  \"dtype\": \""
    << dtype_name(dtype_) << "\",\n  \"params\": {";
  for (size_t i = 0; i < params_.size(); ++i)
    f << (i ? ", " : "") << "\"" << params_[i].first << "\": " << params_[i].second;
  f << "},\n  \"inputs\": " << json_list(inputs_) << ",\n  \"outputs\": " << json_list(outputs_)
    << ",\n  \"grad_outs\": " << json_list(grad_outs_) << ",\n  \"grad_ins\": "
    << json_list(grad_ins_) << "\n}\n";
}

std::unique_ptr<OracleCase> OracleWriter::add_case(const std::string& op, const std::string& name,
                                                   DType dtype) {
  count_++;
  return std::make_unique<OracleCase>(root_ + "/" + op + "__" + name, op, name, dtype);
}

}  // namespace amor::testing
