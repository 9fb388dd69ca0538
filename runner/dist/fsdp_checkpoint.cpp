// Fsdp::save and Fsdp::load: one safetensors file of shards per rank plus fsdp.json (rank 0).
//
//   dir/rank-RRRRR-of-WWWWW.safetensors   per unit "<unit>.master", "<unit>.exp_avg",
//                                         "<unit>.exp_avg_sq" ([shard_numel], padding included);
//                                         metadata format, rank, world_size, step, optimizer_step
//   dir/fsdp.json                          {"format": "amor-fsdp-checkpoint", "version": 1,
//                                          "world_size", "step", "optimizer_step", "dtype",
//                                          "units": [{"name", "numel", "params": [{"name",
//                                          "shape", "weight_decay"}]}], "extra": {...}}
// fsdp.json is written last, after every rank's file is in place, so a checkpoint without it was
// interrupted; the shard files carry the step too, so a mix of two saves is caught on load.
// Gradient shards are not saved: checkpoints are taken at step boundaries.
//
// Failures are made collective: a rank that cannot write or read reports to all, and every rank
// throws (with the failing rank's message), instead of the others waiting on it until the
// communicator's timeout.
#include <filesystem>
#include <functional>

#include "data/json/json.h"
#include "kernels/core/error.h"
#include "models/io/safetensors.h"
#include "runner/dist/fsdp.h"

namespace amor::dist {
namespace {

constexpr const char* kFormat = "amor-fsdp-checkpoint";
constexpr int kVersion = 1;

std::string shard_file(const std::string& dir, int rank, int world) {
  return (std::filesystem::path(dir) / fmt::format("rank-{:05d}-of-{:05d}.safetensors", rank, world)).string();
}

std::string meta_file(const std::string& dir) { return (std::filesystem::path(dir) / "fsdp.json").string(); }

// Runs f on every rank; if it threw anywhere, every rank throws the lowest failing rank's message.
void collectively(Communicator& comm, const char* what, const std::function<void()>& f) {
  std::string msg;
  try {
    f();
  } catch (const std::exception& e) {
    msg = e.what();
    if (msg.empty()) msg = "unknown error";
  }
  const int W = comm.size();
  std::vector<int64_t> failed(static_cast<size_t>(W), 0);
  failed[static_cast<size_t>(comm.rank())] = msg.empty() ? 0 : 1;
  comm.all_reduce(failed.data(), W, ReduceOp::Sum);
  for (int q = 0; q < W; ++q) {
    if (!failed[static_cast<size_t>(q)]) continue;
    const std::string m = comm.broadcast_string(msg, q);
    if (q == comm.rank() || W == 1) throw Error(m);
    throw Error(fmt::format("fsdp {}: rank {} failed: {}", what, q, m));
  }
}

int64_t meta_int(const SafetensorsFile& f, const std::string& path, const std::string& key) {
  auto it = f.metadata.find(key);
  AMOR_CHECK(it != f.metadata.end(), "{}: metadata has no '{}'", path, key);
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw Error(fmt::format("{}: metadata '{}' is '{}', not an integer", path, key, it->second));
}

}  // namespace

void Fsdp::save(const std::string& dir, int64_t step, const std::map<std::string, std::string>& extra) {
  AMOR_CHECK(phase_ == Phase::Idle, "fsdp: save called inside a forward or backward");
  const int W = comm_.size(), r = comm_.rank();
  collectively(comm_, "checkpoint save", [&] {
    AMOR_CHECK(!dir.empty(), "fsdp checkpoint: empty directory name");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    AMOR_CHECK(std::filesystem::is_directory(dir), "fsdp checkpoint: cannot create directory '{}': {}",
               dir, ec.message());
    ensure_training_state();  // a checkpoint always holds the moments (zeros before any step)
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (size_t u = 0; u < units_.size(); ++u) {
      const Shard& s = shards_[u];
      tensors.emplace_back(units_[u].name + ".master", s.master.to(Device::CPU));
      tensors.emplace_back(units_[u].name + ".exp_avg", s.exp_avg.to(Device::CPU));
      tensors.emplace_back(units_[u].name + ".exp_avg_sq", s.exp_avg_sq.to(Device::CPU));
    }
    save_safetensors(shard_file(dir, r, W), tensors,
                     {{"format", kFormat}, {"rank", std::to_string(r)}, {"world_size", std::to_string(W)},
                      {"step", std::to_string(step)}, {"optimizer_step", std::to_string(opt_step_)}});
  });
  collectively(comm_, "checkpoint save", [&] {
    if (r != 0) return;
    json::Array units;
    for (const FlatUnit& fu : units_) {
      json::Array params;
      for (const FlatParam& fp : fu.params) {
        json::Array shape;
        for (int64_t d : fp.shape) shape.emplace_back(d);
        params.emplace_back(json::Object{{"name", fp.name}, {"shape", shape}, {"weight_decay", fp.weight_decay}});
      }
      units.emplace_back(json::Object{{"name", fu.name}, {"numel", fu.numel}, {"params", params}});
    }
    json::Object ex;
    for (const auto& [k, v] : extra) ex.emplace_back(k, v);
    json::Value meta(json::Object{{"format", kFormat},
                                  {"version", kVersion},
                                  {"world_size", W},
                                  {"step", step},
                                  {"optimizer_step", opt_step_},
                                  {"dtype", dtype_name(dtype_)},
                                  {"units", units},
                                  {"extra", ex}});
    write_file_atomic(meta_file(dir), meta.dump() + "\n");
  });
}

FsdpCheckpoint Fsdp::load(const std::string& dir) {
  AMOR_CHECK(phase_ == Phase::Idle, "fsdp: load called inside a forward or backward");
  drop_gathered();
  ensure_training_state();  // the moments are restored with the masters
  FsdpCheckpoint info;
  const int r = comm_.rank();
  collectively(comm_, "checkpoint load", [&] {
    const std::string mpath = meta_file(dir);
    AMOR_CHECK(std::filesystem::exists(mpath),
               "fsdp checkpoint '{}': no fsdp.json (not a checkpoint, or its save was interrupted)", dir);
    const json::Value meta = json::parse_file(mpath);
    AMOR_CHECK(meta.is_object(), "{}: expected a JSON object", mpath);
    const std::string fmt_name = meta.at("format").as_string(mpath + ": format");
    AMOR_CHECK(fmt_name == kFormat, "{}: format is '{}', expected '{}'", mpath, fmt_name, kFormat);
    const int64_t version = meta.at("version").as_int(mpath + ": version");
    AMOR_CHECK(version == kVersion, "{}: version {} is not the supported version {}", mpath, version, kVersion);
    const int64_t W_old = meta.at("world_size").as_int(mpath + ": world_size");
    AMOR_CHECK(W_old >= 1, "{}: world_size {} must be >= 1", mpath, W_old);
    info.world_size = static_cast<int>(W_old);
    info.step = meta.at("step").as_int(mpath + ": step");
    const int64_t opt_step = meta.at("optimizer_step").as_int(mpath + ": optimizer_step");
    const std::string dt = meta.at("dtype").as_string(mpath + ": dtype");
    AMOR_CHECK(dt == dtype_name(dtype_), "{}: the checkpoint holds {} weights but the model is {}", mpath,
               dt, dtype_name(dtype_));
    if (const json::Value* ex = meta.find("extra"))
      for (const auto& [k, v] : ex->as_object(mpath + ": extra"))
        info.extra[k] = v.as_string(mpath + ": extra." + k);

    const json::Array& saved_units = meta.at("units").as_array(mpath + ": units");
    AMOR_CHECK(saved_units.size() == units_.size(), "{}: {} units saved but the model has {}", mpath,
               saved_units.size(), units_.size());
    for (size_t u = 0; u < units_.size(); ++u) {
      const FlatUnit& fu = units_[u];
      const json::Value& su = saved_units[u];
      const std::string where = fmt::format("{}: units[{}]", mpath, u);
      const std::string name = su.at("name").as_string(where + ".name");
      AMOR_CHECK(name == fu.name, "{}: unit '{}' where the model has unit '{}'", where, name, fu.name);
      const json::Array& ps = su.at("params").as_array(where + ".params");
      AMOR_CHECK(ps.size() == fu.params.size(), "{}: unit '{}' has {} parameters saved, the model has {}", where,
                 fu.name, ps.size(), fu.params.size());
      for (size_t k = 0; k < ps.size(); ++k) {
        const FlatParam& fp = fu.params[k];
        const std::string pname = ps[k].at("name").as_string(where + ".params.name");
        Shape shape;
        for (const json::Value& d : ps[k].at("shape").as_array(where + ".params.shape"))
          shape.push_back(d.as_int(where + ".params.shape"));
        AMOR_CHECK(pname == fp.name && shape == fp.shape,
                   "{}: parameter '{}' {} saved where the model has '{}' {}", where, pname,
                   shape_str(shape), fp.name, shape_str(fp.shape));
      }
    }

    // Each new shard [lo, hi) of a unit's flat vector is pieced together from the old shards
    // that overlap it; an old rank's file is read once, and only if some unit needs it.
    std::map<int, SafetensorsFile> files;
    auto old_file = [&](int q) -> const SafetensorsFile& {
      auto it = files.find(q);
      if (it != files.end()) return it->second;
      const std::string path = shard_file(dir, q, static_cast<int>(W_old));
      AMOR_CHECK(std::filesystem::exists(path), "fsdp checkpoint '{}': missing shard file {}", dir, path);
      SafetensorsFile f = load_safetensors(path);
      AMOR_CHECK(meta_int(f, path, "rank") == q && meta_int(f, path, "world_size") == W_old,
                 "{}: metadata says rank {} of {}, expected rank {} of {}", path, meta_int(f, path, "rank"),
                 meta_int(f, path, "world_size"), q, W_old);
      AMOR_CHECK(meta_int(f, path, "step") == info.step,
                 "{}: shard of step {} but fsdp.json is step {} (files of two saves mixed)", path,
                 meta_int(f, path, "step"), info.step);
      return files.emplace(q, std::move(f)).first->second;
    };
    for (size_t u = 0; u < units_.size(); ++u) {
      const FlatUnit& fu = units_[u];
      Shard& s = shards_[u];
      s.master.zero_();
      s.exp_avg.zero_();
      s.exp_avg_sq.zero_();
      s.grad.zero_();
      const int64_t S_old = (fu.numel + W_old - 1) / W_old;
      const int64_t lo = static_cast<int64_t>(r) * fu.shard_numel;
      const int64_t hi = std::min(lo + fu.shard_numel, fu.numel);
      for (int64_t at = lo; at < hi;) {
        const int q = static_cast<int>(at / S_old);
        const int64_t end = std::min(hi, (q + 1) * S_old);
        const SafetensorsFile& f = old_file(q);
        for (auto [suffix, dst] : {std::pair<const char*, Tensor*>{".master", &s.master},
                                   {".exp_avg", &s.exp_avg}, {".exp_avg_sq", &s.exp_avg_sq}}) {
          const std::string tname = fu.name + suffix;
          const std::string path = shard_file(dir, q, static_cast<int>(W_old));
          const Tensor* t = f.find(tname);
          AMOR_CHECK(t != nullptr, "{}: no tensor '{}'", path, tname);
          AMOR_CHECK(t->dtype() == dtype_ && t->shape() == Shape{S_old}, "{}: tensor '{}' is {}, expected {}[{}]",
                     path, tname, t->str(), dtype_name(dtype_), S_old);
          dst->slice_flat(at - lo, {end - at}).copy_from(t->slice_flat(at - q * S_old, {end - at}));
        }
        at = end;
      }
    }
    opt_step_ = opt_step;
  });
  return info;
}

}  // namespace amor::dist
