// run.h5 writer (layout and contract in run_file.h).
#include "runner/output/run_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <set>

#include "kernels/core/error.h"
#include "runner/output/hdf5_util.h"

namespace amor {
namespace {

using h5::Handle;

constexpr const char* kTrainInt[] = {"step", "tokens"};
constexpr const char* kTrainFloat[] = {"loss", "lr", "grad_norm", "tokens_per_s"};
// The runner's datasets of a token set; the rest are the model's token columns.
constexpr const char* kTokenOwn[] = {"token_ids", "entropy", "loss", "offsets", "role"};
bool token_own(const std::string& name) {
  return std::find(std::begin(kTokenOwn), std::end(kTokenOwn), name) != std::end(kTokenOwn);
}
constexpr const char* kRootStrings[] = {"config",     "config_hash", "sweep",   "run_name",
                                        "amor_run_version", "git_commit", "created", "finished"};
// Chunk sizes: training rows are tiny (a chunk is 8 KiB); token chunks are 64 Ki values (256 KiB
// of int32 before gzip), large enough to compress well, small enough to read one sequence cheaply.
constexpr hsize_t kTrainChunk = 1024, kTokenChunk = 65536, kSmallChunk = 4096;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Group and dataset names become HDF5 link names: no '/', not '.', not empty.
void check_name(const std::string& path, const std::string& what, const std::string& name) {
  AMOR_CHECK(!name.empty() && name != "." && name.find('/') == std::string::npos &&
                 name.find('\0') == std::string::npos,
             "{}: {} name '{}' cannot be an HDF5 name (empty, '.' or containing '/')", path, what, name);
}

void check_unique(const std::string& path, const std::string& what, const std::vector<std::string>& names,
                  const std::string& reserved = "") {
  std::set<std::string> seen;
  for (const auto& n : names) {
    check_name(path, what, n);
    AMOR_CHECK(n != reserved, "{}: {} name '{}' is reserved", path, what, n);
    AMOR_CHECK(seen.insert(n).second, "{}: {} '{}' is listed twice", path, what, n);
  }
}

void validate(const std::string& path, const RunLayout& layout) {
  std::vector<std::string> token_columns, rows_attrs;
  for (const auto& c : layout.token_columns) {
    AMOR_CHECK(!token_own(c.name), "{}: token column '{}' is one of the runner's own", path, c.name);
    token_columns.push_back(c.name);
    if (c.rows_attr.empty()) continue;
    AMOR_CHECK(c.rows >= 0 && c.rows <= 4096, "{}: {} must be in [0, 4096], got {}", path, c.rows_attr, c.rows);
    rows_attrs.push_back(c.rows_attr);
  }
  check_unique(path, "token column", token_columns);
  for (const auto& a : rows_attrs)
    AMOR_CHECK(a != "world_size" && a != "threads" && a != "layout_version" &&
                   std::find(std::begin(kRootStrings), std::end(kRootStrings), a) == std::end(kRootStrings),
               "{}: token column attribute '{}' is one of the runner's own", path, a);
  check_unique(path, "token column attribute", rows_attrs);
  std::vector<std::string> columns;
  for (const auto& c : layout.train_columns) {
    AMOR_CHECK(c.shape.size() <= 1 && (c.shape.empty() || (c.shape[0] >= 0 && c.shape[0] <= 4096)),
               "{}: train column '{}' has shape [{}]; expected [] or [width], width in [0, 4096]", path,
               c.name, fmt::join(c.shape, ", "));
    AMOR_CHECK(std::find(std::begin(kTrainInt), std::end(kTrainInt), c.name) == std::end(kTrainInt) &&
                   std::find(std::begin(kTrainFloat), std::end(kTrainFloat), c.name) == std::end(kTrainFloat),
               "{}: train column '{}' is one of the runner's own", path, c.name);
    columns.push_back(c.name);
  }
  check_unique(path, "train column", columns);
  std::vector<std::string> tasks;
  for (const auto& t : layout.eval_tasks) {
    tasks.push_back(t.name);
    check_unique(path, fmt::format("eval task '{}' metric", t.name), t.metrics, "step");
    check_unique(path, fmt::format("eval task '{}' per-example dataset", t.name), t.per_example,
                 "history");
  }
  check_unique(path, "eval task", tasks);
  check_unique(path, "token set", layout.token_sets);
  AMOR_CHECK(layout.role_names.size() <= 256, "{}: {} token role names; a uint8 role holds 256", path,
             layout.role_names.size());
}

Handle file_access(bool clear_status_flags) {
  Handle fapl(h5::check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"), H5Pclose);
  // SWMR needs the 1.10 file format.
  h5::check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), "H5Pset_libver_bounds");
  // No file locks for the writer: a reader (a notebook holding the file open) takes a lock that
  // would stop a resumed run from reopening its file, and the lock guards nothing once SWMR
  // writing starts (HDF5 releases the writer's lock then so that readers can open).
#if H5_VERSION_GE(1, 10, 7)
  h5::check(H5Pset_file_locking(fapl.get(), false, true), "H5Pset_file_locking");
#else
  ::setenv("HDF5_USE_FILE_LOCKING", "FALSE", 0);  // the only switch before 1.10.7
#endif
  if (clear_status_flags) {
    // A writer killed in SWMR mode leaves "open for writing" flags in the superblock, and HDF5
    // refuses to open the file again until they are cleared. This is what the h5clear tool does
    // (a property registered on every file access list, though not in the public headers).
    hbool_t clear = true;
    h5::check(H5Pset(fapl.get(), "clear_status_flags", &clear), "cannot ask HDF5 to clear status flags");
  }
  return fapl;
}

std::vector<std::string> link_names(hid_t group) {
  std::vector<std::string> names;
  auto cb = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  h5::check(H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &names), "cannot list a group");
  return names;
}

std::vector<std::string> attr_names(hid_t obj) {
  std::vector<std::string> names;
  auto cb = [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  h5::check(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &names), "cannot list attributes");
  return names;
}

Handle create_1d(hid_t loc, const std::string& name, hid_t type, hsize_t chunk, bool compress = false) {
  return h5::create_dataset(loc, name, type, {{0}, {chunk}, compress});
}

void build_layout(hid_t file, const RunAttrs& a, const RunLayout& layout) {
  const std::string* strings[] = {&a.config,           &a.config_hash, &a.sweep,   &a.run_name,
                                  &a.amor_run_version, &a.git_commit,  &a.created, nullptr};
  for (size_t i = 0; i < std::size(kRootStrings); ++i)
    h5::create_string_attr(file, kRootStrings[i], strings[i] ? *strings[i] : std::string());
  h5::create_int_attr(file, "world_size", a.world_size);
  h5::create_int_attr(file, "threads", a.threads);
  for (const auto& c : layout.token_columns)
    if (!c.rows_attr.empty()) h5::create_int_attr(file, c.rows_attr, c.rows);
  h5::create_int_attr(file, "layout_version", RunFile::kLayoutVersion);
  Handle train = h5::create_group(file, "train");
  for (const char* n : kTrainInt) create_1d(train.get(), n, H5T_STD_I64LE, kTrainChunk);
  for (const char* n : kTrainFloat) create_1d(train.get(), n, H5T_IEEE_F64LE, kTrainChunk);
  for (const auto& c : layout.train_columns) {
    if (c.shape.empty()) {
      create_1d(train.get(), c.name, H5T_IEEE_F64LE, kTrainChunk);
    } else {
      const hsize_t w = static_cast<hsize_t>(c.shape[0]);
      h5::create_dataset(train.get(), c.name, H5T_IEEE_F64LE,
                         {{0, w}, {kTrainChunk / 8, std::max<hsize_t>(w, 1)}, false});
    }
  }

  Handle eval = h5::create_group(file, "eval");
  for (const auto& t : layout.eval_tasks) {
    Handle g = h5::create_group(eval.get(), t.name);
    h5::create_int_attr(g.get(), "step", -1);
    for (const auto& m : t.metrics) h5::create_double_attr(g.get(), m, kNaN);
    for (const auto& d : t.per_example) create_1d(g.get(), d, H5T_IEEE_F64LE, kSmallChunk);
    Handle hist = h5::create_group(g.get(), "history");
    create_1d(hist.get(), "step", H5T_STD_I64LE, kSmallChunk);
    for (const auto& m : t.metrics) create_1d(hist.get(), m, H5T_IEEE_F64LE, kSmallChunk);
  }

  Handle tokens = h5::create_group(file, "tokens");
  for (const auto& s : layout.token_sets) {
    Handle g = h5::create_group(tokens.get(), s);
    h5::create_int_attr(g.get(), "step", -1);
    create_1d(g.get(), "token_ids", H5T_STD_I32LE, kTokenChunk, true);
    create_1d(g.get(), "entropy", H5T_IEEE_F32LE, kTokenChunk, true);
    create_1d(g.get(), "loss", H5T_IEEE_F32LE, kTokenChunk, true);
    for (const auto& c : layout.token_columns) {
      if (c.rows_attr.empty()) {
        create_1d(g.get(), c.name, H5T_STD_U8LE, kTokenChunk, true);
        continue;
      }
      const hsize_t K = static_cast<hsize_t>(c.rows);
      const hsize_t k_chunk = std::max<hsize_t>(K, 1);  // chunks cannot be 0 wide, even for K = 0
      h5::create_dataset(g.get(), c.name, H5T_STD_U8LE, {{K, 0}, {k_chunk, kTokenChunk / k_chunk}, true});
    }
    if (!layout.role_names.empty()) {
      Handle role = create_1d(g.get(), "role", H5T_STD_U8LE, kTokenChunk, true);
      h5::create_string_array_attr(role.get(), "names", layout.role_names);
    }
    Handle offsets = create_1d(g.get(), "offsets", H5T_STD_I64LE, kSmallChunk, true);
    int64_t zero = 0;
    h5::append(offsets.get(), H5T_NATIVE_INT64, &zero, 0, 1);
  }
}

// Index of the first entry greater than `step` (entries are in increasing order), at most n.
size_t first_after(const std::vector<int64_t>& steps, size_t n, int64_t step) {
  n = std::min(n, steps.size());
  for (size_t i = 0; i < n; ++i)
    if (steps[i] > step) return i;
  return n;
}

}  // namespace

// ---- Impl: the open file and a handle on every dataset (bound after SWMR starts).

struct EvalTask {
  Handle group;
  std::vector<std::string> metrics;
  std::map<std::string, Handle> per_example;
  Handle hist_step;
  std::map<std::string, Handle> hist;  // metric -> dataset
  int64_t step = -1;
};

// A model's token column in a token set: [total] (flat) or [rows, total].
struct TokenCol {
  std::string name;
  Handle ds;
  bool flat = true;
  int64_t rows = 1;
  int64_t extent() const { return static_cast<int64_t>(h5::extent(ds.get())[flat ? 0 : 1]); }
};

struct TokenSet {
  Handle group, token_ids, entropy, loss, offsets;
  Handle role;  // invalid in files made before roles were recorded
  std::vector<TokenCol> cols;
  int64_t step = -1, total = 0;
};

struct RunFile::Impl {
  std::string path;
  Handle file;
  std::vector<std::pair<std::string, Handle>> train;
  std::map<std::string, EvalTask> eval;
  std::map<std::string, TokenSet> tokens;
  int64_t rows = 0, last_step = std::numeric_limits<int64_t>::min();

  void bind();
  void unbind() {
    train.clear();
    eval.clear();
    tokens.clear();
  }
  void truncate(int64_t resume_step);
  void clear_tokens(TokenSet& s);
  void require_open() const { AMOR_CHECK(file.valid(), "{}: the run file is closed", path); }
};

void RunFile::Impl::bind() {
  unbind();
  hid_t f = file.get();
  Handle tg = h5::open_group(f, "train");
  // The runner's columns first, in their order (step first: truncate reads it), then the model's
  // columns, whatever the file holds.
  std::vector<std::string> names(std::begin(kTrainInt), std::end(kTrainInt));
  names.insert(names.end(), std::begin(kTrainFloat), std::end(kTrainFloat));
  const size_t own = names.size();
  for (const auto& n : link_names(tg.get()))
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(own), n) == names.begin() + static_cast<std::ptrdiff_t>(own))
      names.push_back(n);
  rows = std::numeric_limits<int64_t>::max();
  for (const auto& n : names) {
    Handle ds = h5::open_dataset(tg.get(), n);
    rows = std::min<int64_t>(rows, static_cast<int64_t>(h5::extent(ds.get())[0]));
    train.emplace_back(n, std::move(ds));
  }
  std::vector<int64_t> steps = h5::read_1d<int64_t>(train[0].second.get());
  last_step = rows > 0 ? steps[rows - 1] : std::numeric_limits<int64_t>::min();

  Handle eg = h5::open_group(f, "eval");
  for (const auto& name : link_names(eg.get())) {
    EvalTask t;
    t.group = h5::open_group(eg.get(), name);
    t.step = h5::read_int_attr(t.group.get(), "step");
    for (auto& a : attr_names(t.group.get()))
      if (a != "step") t.metrics.push_back(a);
    for (auto& d : link_names(t.group.get()))
      if (d != "history") t.per_example.emplace(d, h5::open_dataset(t.group.get(), d));
    Handle hg = h5::open_group(t.group.get(), "history");
    t.hist_step = h5::open_dataset(hg.get(), "step");
    for (auto& m : t.metrics) t.hist.emplace(m, h5::open_dataset(hg.get(), m));
    eval.emplace(name, std::move(t));
  }

  Handle sg = h5::open_group(f, "tokens");
  for (const auto& name : link_names(sg.get())) {
    TokenSet s;
    s.group = h5::open_group(sg.get(), name);
    s.step = h5::read_int_attr(s.group.get(), "step");
    s.token_ids = h5::open_dataset(s.group.get(), "token_ids");
    s.entropy = h5::open_dataset(s.group.get(), "entropy");
    s.loss = h5::open_dataset(s.group.get(), "loss");
    for (const auto& n : link_names(s.group.get())) {
      if (n == "role") s.role = h5::open_dataset(s.group.get(), n);
      if (token_own(n)) continue;
      TokenCol c{n, h5::open_dataset(s.group.get(), n)};
      const std::vector<hsize_t> dims = h5::extent(c.ds.get());
      c.flat = dims.size() == 1;
      c.rows = c.flat ? 1 : static_cast<int64_t>(dims[0]);
      s.cols.push_back(std::move(c));
    }
    s.offsets = h5::open_dataset(s.group.get(), "offsets");
    s.total = static_cast<int64_t>(h5::extent(s.token_ids.get())[0]);
    tokens.emplace(name, std::move(s));
  }
}

void RunFile::Impl::clear_tokens(TokenSet& s) {
  for (hid_t ds : {s.token_ids.get(), s.entropy.get(), s.loss.get()}) h5::set_extent(ds, {0});
  if (s.role.valid()) h5::set_extent(s.role.get(), {0});
  for (auto& c : s.cols) {
    if (c.flat)
      h5::set_extent(c.ds.get(), {0});
    else
      h5::set_extent(c.ds.get(), {static_cast<hsize_t>(c.rows), 0});
  }
  int64_t zero = 0;
  h5::overwrite_1d(s.offsets.get(), H5T_NATIVE_INT64, &zero, 1);
  h5::write_int_attr(s.group.get(), "step", -1);
  s.step = -1;
  s.total = 0;
}

// Runs before SWMR starts: HDF5 1.10 cannot shrink datasets in SWMR mode.
void RunFile::Impl::truncate(int64_t resume_step) {
  // Training rows: also repairs datasets of unequal length left by a writer killed mid-row.
  std::vector<int64_t> steps = h5::read_1d<int64_t>(train[0].second.get());
  size_t keep = first_after(steps, static_cast<size_t>(rows), resume_step);
  for (auto& [name, ds] : train) {
    std::vector<hsize_t> dims = h5::extent(ds.get());
    dims[0] = keep;
    h5::set_extent(ds.get(), dims);
  }

  for (auto& [name, t] : eval) {
    std::vector<int64_t> hsteps = h5::read_1d<int64_t>(t.hist_step.get());
    size_t n = hsteps.size();
    for (auto& [m, ds] : t.hist) n = std::min<size_t>(n, h5::extent(ds.get())[0]);
    size_t hkeep = first_after(hsteps, n, resume_step);
    h5::set_extent(t.hist_step.get(), {hkeep});
    for (auto& [m, ds] : t.hist) h5::set_extent(ds.get(), {hkeep});
    if (t.step > resume_step) {
      // The latest evaluation is undone: its metrics go back to the last one kept; per-example
      // scores (kept for the latest evaluation only) are dropped until the next evaluation.
      int64_t restored = hkeep > 0 ? hsteps[hkeep - 1] : -1;
      for (auto& [m, ds] : t.hist) {
        double v = hkeep > 0 ? h5::read_1d<double>(ds.get())[hkeep - 1] : kNaN;
        h5::write_double_attr(t.group.get(), m, v);
      }
      h5::write_int_attr(t.group.get(), "step", restored);
      for (auto& [d, ds] : t.per_example) h5::set_extent(ds.get(), {0});
    }
  }

  for (auto& [name, s] : tokens) {
    std::vector<int64_t> offsets = h5::read_1d<int64_t>(s.offsets.get());
    bool consistent = !offsets.empty() && offsets.back() == s.total;
    for (hid_t ds : {s.entropy.get(), s.loss.get()})
      consistent = consistent && static_cast<int64_t>(h5::extent(ds)[0]) == s.total;
    for (const auto& c : s.cols) consistent = consistent && c.extent() == s.total;
    if (s.role.valid()) consistent = consistent && static_cast<int64_t>(h5::extent(s.role.get())[0]) == s.total;
    if (s.step > resume_step || !consistent) clear_tokens(s);
  }
  h5::write_string_attr(file.get(), "finished", "");
}

// ---- RunFile

RunFile::RunFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunFile::RunFile(RunFile&&) noexcept = default;
RunFile& RunFile::operator=(RunFile&& o) noexcept {
  if (this != &o) {
    try {
      close();
    } catch (...) {
    }
    impl_ = std::move(o.impl_);
  }
  return *this;
}
RunFile::~RunFile() {
  try {
    close();
  } catch (...) {
  }
}

RunFile RunFile::create(const std::string& path, const RunAttrs& attrs, const RunLayout& layout) {
  h5::silence_errors();
  validate(path, layout);
  std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()))).string();
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  Handle fapl = file_access(false);
  hid_t f = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  h5::check(f, fmt::format("{}: cannot create the run file (as {})", path, tmp));
  impl->file = Handle(f, H5Fclose);
  try {
    build_layout(f, attrs, layout);
    h5::check(H5Fstart_swmr_write(f), fmt::format("{}: cannot start SWMR writing", path));
    impl->bind();
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw Error(fmt::format("{}: cannot move the new run file into place from {}: {}", path, tmp,
                              std::strerror(errno)));
  } catch (const std::exception& e) {
    impl->unbind();
    impl->file.reset();
    std::remove(tmp.c_str());
    if (dynamic_cast<const Error*>(&e)) throw;
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
  return RunFile(std::move(impl));
}

void RunFile::check_readable(const std::string& path) {
  h5::silence_errors();
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  AMOR_CHECK(!ec, "{}: cannot be read ({})", path, ec.message());
  AMOR_CHECK(size > 0, "{}: is empty (0 bytes), not an HDF5 run file", path);
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  AMOR_CHECK(f != nullptr, "{}: cannot be opened for reading ({})", path, std::strerror(errno));
  std::fclose(f);
#if H5_VERSION_GE(1, 12, 0)
  const htri_t is_h5 = H5Fis_accessible(path.c_str(), H5P_DEFAULT);
#else
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
#endif
  AMOR_CHECK(is_h5 > 0, "{}: is not an HDF5 file ({} bytes; no HDF5 signature)", path, size);
}

RunFile RunFile::open(const std::string& path, int64_t resume_step, const std::string& expected_config_hash) {
  h5::silence_errors();
  AMOR_CHECK(std::filesystem::exists(path), "{}: no run file to resume", path);
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  Handle fapl = file_access(true);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.get());
  h5::check(f, fmt::format("{}: cannot open the run file for writing", path));
  impl->file = Handle(f, H5Fclose);
  AMOR_CHECK(h5::has_attr(f, "layout_version"), "{}: not an amor-run run file (no layout_version)", path);
  int64_t v = h5::read_int_attr(f, "layout_version");
  AMOR_CHECK(v == kLayoutVersion, "{}: run file layout version {}, this amor-run writes version {}", path, v,
             kLayoutVersion);
  if (!expected_config_hash.empty()) {
    std::string have = h5::read_string_attr(f, "config_hash");
    AMOR_CHECK(have == expected_config_hash,
               "{}: belongs to config {}, not {} (the run's config changed since it started)", path, have,
               expected_config_hash);
  }
  impl->bind();
  impl->truncate(resume_step);
  impl->unbind();
  h5::check(H5Fstart_swmr_write(f), fmt::format("{}: cannot start SWMR writing", path));
  impl->bind();
  return RunFile(std::move(impl));
}

void RunFile::append_train(const TrainRow& row) {
  impl_->require_open();
  Impl& m = *impl_;
  AMOR_CHECK(m.rows == 0 || row.step > m.last_step, "{}: training step {} logged after step {} (steps must increase)",
             m.path, row.step, m.last_step);
  const size_t own = std::size(kTrainInt) + std::size(kTrainFloat);
  // Every value is checked before anything is written, so a bad row leaves the columns even.
  std::vector<std::vector<double>> extra;
  size_t known = 0;
  for (size_t c = own; c < m.train.size(); ++c) {
    const auto& [name, ds] = m.train[c];
    const std::vector<hsize_t> dims = h5::extent(ds.get());
    const size_t width = dims.size() > 1 ? static_cast<size_t>(dims[1]) : 1;
    auto it = row.columns.find(name);
    if (it == row.columns.end() || it->second.empty()) {
      extra.emplace_back(width, kNaN);
    } else {
      AMOR_CHECK(it->second.size() == width, "{}: step {}: {} values for train column '{}' of width {}", m.path,
                 row.step, it->second.size(), name, width);
      extra.push_back(it->second);
    }
    known += it != row.columns.end();
  }
  if (known != row.columns.size())
    for (const auto& [name, v] : row.columns) {
      bool found = false;
      for (size_t c = own; c < m.train.size(); ++c) found = found || m.train[c].first == name;
      AMOR_CHECK(found, "{}: step {}: train column '{}' was not declared when the file was created", m.path,
                 row.step, name);
    }
  const int64_t ints[] = {row.step, row.tokens};
  const double floats[] = {row.loss, row.lr, row.grad_norm, row.tokens_per_s};
  size_t i = 0;
  for (int64_t v : ints) h5::append(m.train[i++].second.get(), H5T_NATIVE_INT64, &v, 0, 1);
  for (double v : floats) h5::append(m.train[i++].second.get(), H5T_NATIVE_DOUBLE, &v, 0, 1);
  for (const auto& v : extra) h5::append(m.train[i++].second.get(), H5T_NATIVE_DOUBLE, v.data(), 0, 1);
  m.rows += 1;
  m.last_step = row.step;
}

void RunFile::write_eval(const std::string& task, int64_t step, const std::map<std::string, double>& metrics,
                         const std::map<std::string, std::vector<double>>& per_example) {
  impl_->require_open();
  Impl& m = *impl_;
  auto it = m.eval.find(task);
  if (it == m.eval.end()) {
    std::vector<std::string> declared;
    for (auto& [n, t] : m.eval) declared.push_back(n);
    throw Error(fmt::format("{}: eval task '{}' was not declared when the file was created (declared: {})",
                            m.path, task, fmt::join(declared, ", ")));
  }
  EvalTask& t = it->second;
  AMOR_CHECK(step >= t.step, "{}: eval task '{}': step {} written after step {} (steps must not decrease)",
             m.path, task, step, t.step);
  for (auto& [name, v] : metrics)
    AMOR_CHECK(t.hist.count(name), "{}: eval task '{}' has no metric '{}' (declared: {})", m.path, task, name,
               fmt::join(t.metrics, ", "));
  for (auto& [name, v] : per_example)
    AMOR_CHECK(t.per_example.count(name), "{}: eval task '{}' has no per-example dataset '{}'", m.path, task,
               name);
  h5::write_int_attr(t.group.get(), "step", step);
  h5::append(t.hist_step.get(), H5T_NATIVE_INT64, &step, 0, 1);
  for (auto& [name, ds] : t.hist) {
    auto mv = metrics.find(name);
    double v = mv == metrics.end() ? kNaN : mv->second;
    h5::write_double_attr(t.group.get(), name, v);
    h5::append(ds.get(), H5T_NATIVE_DOUBLE, &v, 0, 1);
  }
  for (auto& [name, ds] : t.per_example) {
    auto pv = per_example.find(name);
    static const std::vector<double> none;
    const std::vector<double>& v = pv == per_example.end() ? none : pv->second;
    h5::overwrite_1d(ds.get(), H5T_NATIVE_DOUBLE, v.data(), v.size());
  }
  t.step = step;
}

void RunFile::write_tokens(const std::string& set, int64_t step, const TokenSequences& seqs) {
  impl_->require_open();
  Impl& m = *impl_;
  auto it = m.tokens.find(set);
  if (it == m.tokens.end()) {
    std::vector<std::string> declared;
    for (auto& [n, s] : m.tokens) declared.push_back(n);
    throw Error(fmt::format("{}: token set '{}' was not declared when the file was created (declared: {})",
                            m.path, set, fmt::join(declared, ", ")));
  }
  TokenSet& s = it->second;
  int64_t total = 0;
  for (int64_t len : seqs.lengths) {
    AMOR_CHECK(len >= 0, "{}: token set '{}': negative sequence length {}", m.path, set, len);
    total += len;
  }
  std::string rows;  // the token columns' rows, for the message
  for (const auto& c : s.cols)
    if (!c.flat) rows += fmt::format(", {} has {} rows", c.name, c.rows);
  auto expect = [&](const std::string& field, size_t got, int64_t want) {
    AMOR_CHECK(static_cast<int64_t>(got) == want,
               "{}: token set '{}': {} has {} values, expected {} (sequence lengths sum to {}{})", m.path,
               set, field, got, want, total, rows);
  };
  expect("token_ids", seqs.token_ids.size(), total);
  expect("entropy", seqs.entropy.size(), total);
  expect("loss", seqs.loss.size(), total);
  if (!seqs.role.empty()) expect("role", seqs.role.size(), total);
  static const std::vector<uint8_t> kNone;
  auto values = [&](const std::string& name) -> const std::vector<uint8_t>& {
    auto it = seqs.columns.find(name);
    return it == seqs.columns.end() ? kNone : it->second;
  };
  for (const auto& [name, v] : seqs.columns)
    AMOR_CHECK(std::any_of(s.cols.begin(), s.cols.end(), [&](const TokenCol& c) { return c.name == name; }),
               "{}: token set '{}' has no token column '{}'", m.path, set, name);
  for (const auto& c : s.cols) {
    const auto& v = values(c.name);
    if (!c.flat || !v.empty()) expect(c.name, v.size(), total * c.rows);
  }

  if (step != s.step) {
    m.clear_tokens(s);
    h5::write_int_attr(s.group.get(), "step", step);
    s.step = step;
  }
  const hsize_t n = static_cast<hsize_t>(total);
  h5::append(s.token_ids.get(), H5T_NATIVE_INT32, seqs.token_ids.data(), 0, n);
  h5::append(s.entropy.get(), H5T_NATIVE_FLOAT, seqs.entropy.data(), 0, n);
  h5::append(s.loss.get(), H5T_NATIVE_FLOAT, seqs.loss.data(), 0, n);
  if (s.role.valid()) {  // roles left out are none (0)
    const std::vector<uint8_t> none(seqs.role.empty() ? n : 0, 0);
    h5::append(s.role.get(), H5T_NATIVE_UINT8, seqs.role.empty() ? none.data() : seqs.role.data(), 0, n);
  }
  for (const auto& c : s.cols) {
    const auto& v = values(c.name);
    const std::vector<uint8_t> zeros(v.empty() && c.flat ? n : 0, 0);  // a [total] column left out
    h5::append(c.ds.get(), H5T_NATIVE_UINT8, v.empty() && c.flat ? zeros.data() : v.data(), c.flat ? 0 : 1, n);
  }
  // Offsets last: a reader that sees a sequence's end offset finds its tokens written.
  std::vector<int64_t> ends;
  int64_t end = s.total;
  for (int64_t len : seqs.lengths) ends.push_back(end += len);
  h5::append(s.offsets.get(), H5T_NATIVE_INT64, ends.data(), 0, ends.size());
  s.total += total;
}

void RunFile::flush() {
  impl_->require_open();
  h5::check(H5Fflush(impl_->file.get(), H5F_SCOPE_GLOBAL), fmt::format("{}: flush failed", impl_->path));
}

void RunFile::finish(const std::string& finished_time) {
  impl_->require_open();
  h5::write_string_attr(impl_->file.get(), "finished", finished_time);
  flush();
}

void RunFile::close() {
  if (!impl_ || !impl_->file.valid()) return;
  impl_->unbind();
  hid_t f = impl_->file.get();
  herr_t flushed = H5Fflush(f, H5F_SCOPE_GLOBAL);
  std::string stack = flushed < 0 ? h5::error_stack() : "";
  // Release the handle whatever happens, so a failed close never retries on a dead id.
  herr_t closed = H5Fclose(impl_->file.release());
  if (flushed < 0) throw Error(fmt::format("{}: flush on close failed (HDF5: {})", impl_->path, stack));
  h5::check(closed, fmt::format("{}: close failed", impl_->path));
}

const std::string& RunFile::path() const { return impl_->path; }
int64_t RunFile::token_column_rows(const std::string& column) const {
  for (const auto& [name, s] : impl_->tokens)
    for (const auto& c : s.cols)
      if (c.name == column) return c.rows;
  return -1;
}

void set_token_rows(TokenSequences& seqs, const std::vector<TokenColumn>& columns,
                    const std::vector<std::vector<uint8_t>>& rows) {
  AMOR_CHECK(static_cast<int64_t>(rows.size()) == model::token_row_count(columns),
             "token rows: {} rows for columns of {}", rows.size(), model::token_row_count(columns));
  size_t r = 0;
  for (const auto& c : columns) {
    auto& out = seqs.columns[c.name];
    out.clear();
    for (int64_t k = 0; k < (c.rows_attr.empty() ? 1 : c.rows); ++k, ++r) out.insert(out.end(), rows[r].begin(), rows[r].end());
  }
}
int64_t RunFile::threads() const {
  impl_->require_open();
  return h5::has_attr(impl_->file.get(), "threads") ? h5::read_int_attr(impl_->file.get(), "threads") : -1;
}
int64_t RunFile::train_rows() const { return impl_->rows; }
std::vector<int64_t> RunFile::train_steps() const {
  impl_->require_open();
  std::vector<int64_t> steps = h5::read_1d<int64_t>(impl_->train[0].second.get());
  steps.resize(static_cast<size_t>(impl_->rows));
  return steps;
}

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace amor
