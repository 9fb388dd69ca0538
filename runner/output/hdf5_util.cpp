// HDF5 helpers for run.h5 (see hdf5_util.h).
#include "runner/output/hdf5_util.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/core/error.h"

namespace amor::h5 {

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void Handle::reset() {
  if (id_ >= 0 && close_) close_(id_);
  id_ = H5I_INVALID_HID;
}

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {

herr_t collect(unsigned n, const H5E_error2_t* e, void* out) {
  auto* msgs = static_cast<std::vector<std::string>*>(out);
  (void)n;
  if (e->desc && *e->desc) msgs->emplace_back(e->desc);
  return 0;
}

// The object's path inside the file, for messages ("/train/loss").
std::string name_of(hid_t obj) {
  char buf[512];
  ssize_t n = H5Iget_name(obj, buf, sizeof buf);
  return n > 0 ? std::string(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1)) : "?";
}

}  // namespace

std::string error_stack() {
  std::vector<std::string> msgs;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &msgs);
  H5Eclear2(H5E_DEFAULT);
  if (msgs.empty()) return "no details";
  // The outermost entry says what failed, the innermost why (errno text for file errors).
  if (msgs.size() == 1 || msgs.front() == msgs.back()) return msgs.front();
  return msgs.front() + ": " + msgs.back();
}

int64_t check(int64_t status, std::string_view what) {
  if (status < 0) throw Error(fmt::format("{} (HDF5: {})", what, error_stack()));
  return status;
}

template <> hid_t native_type<int8_t>() { return H5T_NATIVE_INT8; }
template <> hid_t native_type<uint8_t>() { return H5T_NATIVE_UINT8; }
template <> hid_t native_type<int32_t>() { return H5T_NATIVE_INT32; }
template <> hid_t native_type<int64_t>() { return H5T_NATIVE_INT64; }
template <> hid_t native_type<float>() { return H5T_NATIVE_FLOAT; }
template <> hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }

// ---- Attributes

namespace {

Handle vlen_utf8() {
  Handle t(check(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  check(H5Tset_size(t.get(), H5T_VARIABLE), "H5Tset_size");
  check(H5Tset_cset(t.get(), H5T_CSET_UTF8), "H5Tset_cset");
  return t;
}

Handle scalar_space() { return Handle(check(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose); }

void create_attr(hid_t obj, const std::string& name, hid_t file_type, hid_t mem_type, const void* value) {
  std::string where = fmt::format("attribute '{}' on {}", name, name_of(obj));
  Handle space = scalar_space();
  Handle a(check(H5Acreate2(obj, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                 "cannot create " + where),
           H5Aclose);
  check(H5Awrite(a.get(), mem_type, value), "cannot write " + where);
}

Handle open_attr(hid_t obj, const std::string& name) {
  std::string where = fmt::format("attribute '{}' on {}", name, name_of(obj));
  htri_t exists = H5Aexists(obj, name.c_str());
  check(exists, "cannot look up " + where);
  if (!exists) throw Error(fmt::format("{} does not exist", where));
  return Handle(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "cannot open " + where), H5Aclose);
}

void write_attr(hid_t obj, const std::string& name, hid_t mem_type, const void* value) {
  Handle a = open_attr(obj, name);
  check(H5Awrite(a.get(), mem_type, value),
        fmt::format("cannot write attribute '{}' on {}", name, name_of(obj)));
}

void read_attr(hid_t obj, const std::string& name, hid_t mem_type, void* value) {
  Handle a = open_attr(obj, name);
  check(H5Aread(a.get(), mem_type, value),
        fmt::format("cannot read attribute '{}' on {} (wrong type?)", name, name_of(obj)));
}

}  // namespace

bool has_attr(hid_t obj, const std::string& name) {
  return check(H5Aexists(obj, name.c_str()), fmt::format("cannot look up attribute '{}'", name)) > 0;
}

void create_string_attr(hid_t obj, const std::string& name, const std::string& value) {
  Handle t = vlen_utf8();
  const char* p = value.c_str();
  create_attr(obj, name, t.get(), t.get(), &p);
}
void create_double_attr(hid_t obj, const std::string& name, double value) {
  create_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}
void create_int_attr(hid_t obj, const std::string& name, int64_t value) {
  create_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void create_string_array_attr(hid_t obj, const std::string& name, const std::vector<std::string>& values) {
  std::string where = fmt::format("attribute '{}' on {}", name, name_of(obj));
  Handle t = vlen_utf8();
  const hsize_t n = values.size();
  Handle space(check(H5Screate_simple(1, &n, nullptr), "H5Screate_simple"), H5Sclose);
  Handle a(check(H5Acreate2(obj, name.c_str(), t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                 "cannot create " + where),
           H5Aclose);
  std::vector<const char*> p;
  for (const auto& v : values) p.push_back(v.c_str());
  check(H5Awrite(a.get(), t.get(), p.data()), "cannot write " + where);
}

std::vector<std::string> read_string_array_attr(hid_t obj, const std::string& name) {
  std::string where = fmt::format("attribute '{}' on {}", name, name_of(obj));
  Handle a = open_attr(obj, name);
  Handle space(check(H5Aget_space(a.get()), "cannot get the space of " + where), H5Sclose);
  AMOR_CHECK(H5Sget_simple_extent_ndims(space.get()) == 1, "{} is not a 1-D array", where);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  Handle t = vlen_utf8();
  std::vector<char*> p(n, nullptr);
  check(H5Aread(a.get(), t.get(), p.data()), "cannot read " + where + " (not strings?)");
  std::vector<std::string> out;
  for (char* c : p) out.emplace_back(c ? c : "");
  H5Dvlen_reclaim(t.get(), space.get(), H5P_DEFAULT, p.data());
  return out;
}

void write_string_attr(hid_t obj, const std::string& name, const std::string& value) {
  Handle t = vlen_utf8();
  const char* p = value.c_str();
  write_attr(obj, name, t.get(), &p);
}
void write_double_attr(hid_t obj, const std::string& name, double value) {
  write_attr(obj, name, H5T_NATIVE_DOUBLE, &value);
}
void write_int_attr(hid_t obj, const std::string& name, int64_t value) {
  write_attr(obj, name, H5T_NATIVE_INT64, &value);
}

std::string read_string_attr(hid_t obj, const std::string& name) {
  Handle t = vlen_utf8();
  char* p = nullptr;
  read_attr(obj, name, t.get(), &p);
  std::string s = p ? p : "";
  H5free_memory(p);
  return s;
}
double read_double_attr(hid_t obj, const std::string& name) {
  double v = 0;
  read_attr(obj, name, H5T_NATIVE_DOUBLE, &v);
  return v;
}
int64_t read_int_attr(hid_t obj, const std::string& name) {
  int64_t v = 0;
  read_attr(obj, name, H5T_NATIVE_INT64, &v);
  return v;
}

// ---- Groups and datasets

Handle create_group(hid_t loc, const std::string& name) {
  return Handle(check(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                      fmt::format("cannot create group '{}' in {}", name, name_of(loc))),
                H5Gclose);
}

Handle open_group(hid_t loc, const std::string& name) {
  return Handle(check(H5Gopen2(loc, name.c_str(), H5P_DEFAULT),
                      fmt::format("no group '{}' in {}", name, name_of(loc))),
                H5Gclose);
}

Handle open_dataset(hid_t loc, const std::string& name) {
  return Handle(check(H5Dopen2(loc, name.c_str(), H5P_DEFAULT),
                      fmt::format("no dataset '{}' in {}", name, name_of(loc))),
                H5Dclose);
}

Handle create_dataset(hid_t loc, const std::string& name, hid_t file_type, const DatasetOptions& opt) {
  std::string what = fmt::format("cannot create dataset '{}' in {}", name, name_of(loc));
  int rank = static_cast<int>(opt.initial.size());
  AMOR_CHECK(rank > 0 && opt.chunk.size() == opt.initial.size(), "{}: chunk rank {} != rank {}", what,
             opt.chunk.size(), rank);
  std::vector<hsize_t> maxdims(rank, H5S_UNLIMITED);
  Handle space(check(H5Screate_simple(rank, opt.initial.data(), maxdims.data()), what), H5Sclose);
  Handle dcpl(check(H5Pcreate(H5P_DATASET_CREATE), what), H5Pclose);
  check(H5Pset_chunk(dcpl.get(), rank, opt.chunk.data()), what);
  if (opt.compress) {
    check(H5Pset_shuffle(dcpl.get()), what);
    check(H5Pset_deflate(dcpl.get(), 4), what);
  }
  return Handle(check(H5Dcreate2(loc, name.c_str(), file_type, space.get(), H5P_DEFAULT, dcpl.get(),
                                 H5P_DEFAULT),
                      what),
                H5Dclose);
}

std::vector<hsize_t> extent(hid_t ds) {
  std::string what = fmt::format("cannot read the extent of {}", name_of(ds));
  Handle space(check(H5Dget_space(ds), what), H5Sclose);
  int rank = static_cast<int>(check(H5Sget_simple_extent_ndims(space.get()), what));
  std::vector<hsize_t> dims(rank);
  check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), what);
  return dims;
}

void set_extent(hid_t ds, const std::vector<hsize_t>& dims) {
  check(H5Dset_extent(ds, dims.data()), fmt::format("cannot resize {}", name_of(ds)));
}

void append(hid_t ds, hid_t mem_type, const void* data, int axis, hsize_t count) {
  std::string what = fmt::format("cannot append to {}", name_of(ds));
  std::vector<hsize_t> dims = extent(ds);
  AMOR_CHECK(axis >= 0 && axis < static_cast<int>(dims.size()), "{}: axis {} out of range", what, axis);
  if (count == 0) return;
  std::vector<hsize_t> start(dims.size(), 0), block = dims;
  start[axis] = dims[axis];
  block[axis] = count;
  dims[axis] += count;
  for (hsize_t b : block)
    if (b == 0) {  // an axis of extent 0 (e.g. K = 0 gates): grow, nothing to write
      set_extent(ds, dims);
      return;
    }
  set_extent(ds, dims);
  Handle fspace(check(H5Dget_space(ds), what), H5Sclose);
  check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, block.data(), nullptr),
        what);
  Handle mspace(check(H5Screate_simple(static_cast<int>(block.size()), block.data(), nullptr), what),
                H5Sclose);
  check(H5Dwrite(ds, mem_type, mspace.get(), fspace.get(), H5P_DEFAULT, data), what);
}

void overwrite_1d(hid_t ds, hid_t mem_type, const void* data, hsize_t n) {
  set_extent(ds, {0});
  append(ds, mem_type, data, 0, n);
}

template <class T> std::vector<T> read_1d(hid_t ds) {
  std::vector<hsize_t> dims = extent(ds);
  AMOR_CHECK(dims.size() == 1, "{} has {} dimensions, expected 1", name_of(ds), dims.size());
  std::vector<T> out(dims[0]);
  if (!out.empty())
    check(H5Dread(ds, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
          fmt::format("cannot read {}", name_of(ds)));
  return out;
}

template std::vector<int64_t> read_1d<int64_t>(hid_t);
template std::vector<int32_t> read_1d<int32_t>(hid_t);
template std::vector<uint8_t> read_1d<uint8_t>(hid_t);
template std::vector<float> read_1d<float>(hid_t);
template std::vector<double> read_1d<double>(hid_t);

}  // namespace amor::h5
