// A thin C++ layer over the HDF5 C API for run.h5: owning handles, errors as amor::Error carrying
// HDF5's own explanation (e.g. "Permission denied"), attributes, and extendible chunked datasets
// that grow along one axis (all the run file needs so it can stay in SWMR mode).
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace amor::h5 {

// Owns one HDF5 identifier and closes it with the matching H5*close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();
  hid_t release() {  // gives up ownership without closing
    hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

// Turns off HDF5's habit of printing its error stack to stderr; errors become exceptions instead.
void silence_errors();
// Describes HDF5's current error stack in one line (outermost and innermost causes) and clears it.
std::string error_stack();
// Throws amor::Error("<what> (HDF5: <stack>)") when status < 0; returns status otherwise.
int64_t check(int64_t status, std::string_view what);

// The HDF5 memory type of a C++ scalar.
template <class T> hid_t native_type();
template <> hid_t native_type<int8_t>();
template <> hid_t native_type<uint8_t>();
template <> hid_t native_type<int32_t>();
template <> hid_t native_type<int64_t>();
template <> hid_t native_type<float>();
template <> hid_t native_type<double>();

// ---- Attributes (scalar). Strings are variable-length UTF-8, which h5py reads as str.
bool has_attr(hid_t obj, const std::string& name);
void create_string_attr(hid_t obj, const std::string& name, const std::string& value);
void create_double_attr(hid_t obj, const std::string& name, double value);
void create_int_attr(hid_t obj, const std::string& name, int64_t value);
// Overwrite an attribute that exists (SWMR cannot create new ones).
void write_string_attr(hid_t obj, const std::string& name, const std::string& value);
void write_double_attr(hid_t obj, const std::string& name, double value);
void write_int_attr(hid_t obj, const std::string& name, int64_t value);
std::string read_string_attr(hid_t obj, const std::string& name);
double read_double_attr(hid_t obj, const std::string& name);
int64_t read_int_attr(hid_t obj, const std::string& name);
// A 1-D attribute of variable-length UTF-8 strings (h5py reads it as an array of str).
void create_string_array_attr(hid_t obj, const std::string& name, const std::vector<std::string>& values);
std::vector<std::string> read_string_array_attr(hid_t obj, const std::string& name);

// ---- Groups and datasets.
Handle create_group(hid_t loc, const std::string& name);
Handle open_group(hid_t loc, const std::string& name);
Handle open_dataset(hid_t loc, const std::string& name);

struct DatasetOptions {
  std::vector<hsize_t> initial;  // starting extent; every axis may grow (max = unlimited)
  std::vector<hsize_t> chunk;    // chunk shape, all > 0
  bool compress = false;         // byte shuffle + gzip
};
Handle create_dataset(hid_t loc, const std::string& name, hid_t file_type, const DatasetOptions& opt);

std::vector<hsize_t> extent(hid_t ds);
void set_extent(hid_t ds, const std::vector<hsize_t>& dims);
// Grows the dataset by `count` along `axis` and writes a row-major block (other axes at their
// current extent) into the new part.
void append(hid_t ds, hid_t mem_type, const void* data, int axis, hsize_t count);
// Replaces a 1-D dataset's contents with `n` values.
void overwrite_1d(hid_t ds, hid_t mem_type, const void* data, hsize_t n);
// Reads a whole 1-D dataset.
template <class T> std::vector<T> read_1d(hid_t ds);

}  // namespace amor::h5
