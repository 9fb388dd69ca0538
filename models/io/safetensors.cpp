#include "models/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/json/json.h"

namespace amor {

namespace {

const char* st_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
  }
  return "?";
}

bool parse_st_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::F32}, {"F64", DType::F64}, {"BF16", DType::BF16}, {"F16", DType::F16},
      {"I32", DType::I32}, {"I64", DType::I64}, {"U8", DType::U8}};
  for (auto& [name, t] : table)
    if (s == name) {
      *out = t;
      return true;
    }
  return false;
}

}  // namespace

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  std::filesystem::path target(path);
  std::string tmp = (target.parent_path() / ("." + target.filename().string() + ".tmp." +
                                             std::to_string(::getpid())))
                        .string();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  AMOR_CHECK(fd >= 0, "{}: cannot create temporary file {}", path, tmp);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      ::close(fd);
      std::remove(tmp.c_str());
      throw Error(fmt::format("{}: write failed (disk full?)", path));
    }
    done += static_cast<size_t>(n);
  }
  bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: could not be written (fsync/rename failed)", path));
  }
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  json::Object header;
  if (!metadata.empty()) {
    json::Object meta;
    for (auto& [k, v] : metadata) meta.emplace_back(k, json::Value(v));
    header.emplace_back("__metadata__", json::Value(std::move(meta)));
  }
  int64_t offset = 0;
  std::vector<Tensor> host;
  for (auto& [name, t] : tensors) {
    AMOR_CHECK(t.defined(), "{}: tensor '{}' is undefined", path, name);
    Tensor h = t.to(Device::CPU);
    json::Array shape;
    shape.reserve(h.shape().size());
    for (int64_t d : h.shape()) shape.emplace_back(d);
    json::Object entry;
    entry.emplace_back("dtype", json::Value(st_dtype(h.dtype())));
    entry.emplace_back("shape", json::Value(std::move(shape)));
    int64_t end = offset + static_cast<int64_t>(h.nbytes());
    entry.emplace_back("data_offsets", json::Value(json::Array{json::Value(offset), json::Value(end)}));
    header.emplace_back(name, json::Value(std::move(entry)));
    offset = end;
    host.push_back(h);
  }
  std::string head = json::Value(std::move(header)).dump();
  head.append((8 - head.size() % 8) % 8, ' ');  // the format pads the header with spaces
  std::string bytes(8, '\0');
  uint64_t n = head.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  bytes += head;
  bytes.reserve(bytes.size() + static_cast<size_t>(offset));
  for (const Tensor& h : host) bytes.append(static_cast<const char*>(h.raw_data()), h.nbytes());
  write_file_atomic(path, bytes);
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  AMOR_CHECK(f.good(), "{}: cannot open for reading", path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string bytes = ss.str();
  AMOR_CHECK(bytes.size() >= 8, "{}: not a safetensors file ({} bytes, shorter than its header length)",
             path, bytes.size());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  AMOR_CHECK(n <= bytes.size() - 8, "{}: header length {} runs past the end of the file ({} bytes)",
             path, n, bytes.size());
  json::Value header = json::parse(std::string_view(bytes).substr(8, n), path + " (header)");
  AMOR_CHECK(header.is_object(), "{}: header is not a JSON object", path);
  size_t data_start = 8 + n;
  size_t data_size = bytes.size() - data_start;
  SafetensorsFile out;
  for (const auto& [name, entry] : header.as_object()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : entry.as_object("__metadata__"))
        out.metadata[k] = v.as_string(path + ": metadata '" + k + "'");
      continue;
    }
    std::string what = path + ": tensor '" + name + "'";
    DType dt;
    const std::string& ds = entry.at("dtype").as_string(what + " dtype");
    AMOR_CHECK(parse_st_dtype(ds, &dt), "{} has unsupported dtype {}", what, ds);
    Shape shape;
    for (const auto& d : entry.at("shape").as_array(what + " shape")) {
      shape.push_back(d.as_int(what + " shape"));
      AMOR_CHECK(shape.back() >= 0, "{} has a negative dimension", what);
    }
    const auto& offs = entry.at("data_offsets").as_array(what + " data_offsets");
    AMOR_CHECK(offs.size() == 2, "{}: data_offsets should hold 2 numbers", what);
    int64_t b = offs[0].as_int(what), e = offs[1].as_int(what);
    int64_t expect = shape_numel(shape) * static_cast<int64_t>(dtype_size(dt));
    AMOR_CHECK(b >= 0 && e >= b && static_cast<uint64_t>(e) <= data_size,
               "{}: bytes [{}, {}) lie outside the file's {} data bytes (truncated file?)", what, b,
               e, data_size);
    AMOR_CHECK(e - b == expect, "{}: shape {} of {} needs {} bytes but data_offsets give {}", what,
               shape_str(shape), ds, expect, e - b);
    Tensor t = Tensor::empty(shape, dt);
    std::memcpy(t.raw_data(), bytes.data() + data_start + b, static_cast<size_t>(expect));
    out.tensors.emplace_back(name, t);
  }
  return out;
}

}  // namespace amor
