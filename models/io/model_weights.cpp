#include "models/io/model_weights.h"

#include <set>
#include <vector>

#include "kernels/core/error.h"
#include "models/core/config_json.h"
#include "models/io/safetensors.h"

namespace amor::model {

namespace {
constexpr size_t kMaxListed = 10;  // problems named in one error; the rest are counted
}  // namespace

void save_model_weights(const std::string& path, const ParamStore& ps, const ModelConfig& cfg,
                        const std::string& amor_run_version) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.reserve(ps.params().size());
  for (const auto& p : ps.params()) tensors.emplace_back(p->name, p->value.to(Device::CPU));
  save_safetensors(path, tensors,
                   {{"format", "amor-run model weights"},
                    {"model_config", to_json(cfg).dump()},
                    {"amor_run_version", amor_run_version},
                    {"parameters", std::to_string(ps.numel())}});
}

std::map<std::string, std::string> load_model_weights(const std::string& path, ParamStore& ps) {
  SafetensorsFile file = load_safetensors(path);
  std::vector<std::string> problems;
  std::vector<std::pair<Param*, const Tensor*>> matched;
  std::set<std::string> names;
  for (const auto& p : ps.params()) {
    names.insert(p->name);
    const Tensor* t = file.find(p->name);
    if (!t) {
      problems.push_back(fmt::format("tensor '{}' is missing (the model's shape is {})", p->name,
                                     shape_str(p->value.shape())));
    } else if (t->shape() != p->value.shape()) {
      problems.push_back(fmt::format("tensor '{}' has shape {} in the file, the model's is {}",
                                     p->name, shape_str(t->shape()), shape_str(p->value.shape())));
    } else if (!is_floating(t->dtype())) {
      problems.push_back(fmt::format("tensor '{}' is {} in the file, expected a floating-point type",
                                     p->name, dtype_name(t->dtype())));
    } else {
      matched.emplace_back(p.get(), t);
    }
  }
  for (const auto& [name, t] : file.tensors)
    if (!names.count(name))
      problems.push_back(fmt::format("unexpected tensor '{}' {} (not a parameter of this model)",
                                     name, shape_str(t.shape())));
  if (!problems.empty()) {
    std::string msg = fmt::format("{}: the weights do not fit this model ({} problem{}):", path,
                                  problems.size(), problems.size() == 1 ? "" : "s");
    for (size_t i = 0; i < problems.size() && i < kMaxListed; ++i) msg += "\n  " + problems[i];
    if (problems.size() > kMaxListed)
      msg += fmt::format("\n  ... and {} more", problems.size() - kMaxListed);
    throw Error(msg);
  }
  for (auto& [p, t] : matched) {
    p->value.copy_from(t->dtype() == ps.dtype() ? *t : t->to(ps.dtype()));
    ++p->version;  // in place: the same storage holds other values
  }
  return file.metadata;
}

std::map<std::string, std::string> load_model_weights(const std::string& path, LanguageModel& model) {
  std::map<std::string, std::string> meta = load_model_weights(path, model.params());
  model.restore_checkpoint_state(meta, /*required=*/false);
  return meta;
}

}  // namespace amor::model
