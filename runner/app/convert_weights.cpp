#include "runner/app/convert_weights.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "kernels/core/error.h"
#include "models/amor/amor_model.h"
#include "models/core/config_json.h"
#include "models/io/authors_layout.h"
#include "models/lm/language_model.h"
#include "runner/app/preset_resolve.h"
#include "runner/app/version.h"
#include "runner/app/subcommand.h"
#include "runner/app/text_file.h"
#include "runner/config/canonical.h"
#include "runner/config/sweep.h"

namespace amor {
namespace {

const char* kUsage =
    "usage: amor-run convert-weights --from authors --model RUN_CONFIG IN.safetensors OUT.safetensors\n"
    "       amor-run convert-weights --to authors [--model RUN_CONFIG] [--gates JSON] IN.safetensors "
    "OUT.safetensors\n"
    "  RUN_CONFIG: the sweep file (.yaml/.yml, presets resolved; its runs share one model) or a run's\n"
    "  config.json whose model (model.kind amor) describes the checkpoint; --gates: the gates' EMA state [{\"m\":..,\"s\":..} per block] when IN has none.\n";

using Usage = UsageError;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// .json: a resolved run config (a run folder's config.json) as it is. .yaml/.yml: a sweep file
// (the one that evaluates the checkpoint), expanded as amor-run does, presets included; its runs
// must agree on the model.
model::ModelConfig model_from_run_config(const std::string& path) {
  if (ends_with(path, ".json")) return config::load_run_config_json(read_text_file(path), path).model;
  config::ExpandOptions eo;
  eo.resolve = [](config::RunConfig& cfg, const config::KeyLocations& set_at) { apply_model_preset(cfg, set_at); };
  eo.check_tokenizer_vocab = false;  // the data is the run's business; a conversion reads the model only
  std::vector<config::RunSpec> runs = config::expand_sweep({path}, {}, eo);
  AMOR_CHECK(!runs.empty(), "{}: the sweep has no runs", path);
  const std::string first = model::to_json(runs[0].config.model).dump();
  for (const auto& r : runs)
    AMOR_CHECK(model::to_json(r.config.model).dump() == first,
               "{}: its runs '{}' and '{}' have different models: give a sweep (or a run's config.json) of one model",
               path, runs[0].id(), r.id());
  return runs[0].config.model;
}

// PyTorch's pickles need PyTorch to read safely: refused here, with the way round.
void refuse_pickle(const std::string& path) {
  if (ends_with(path, ".pt") || ends_with(path, ".bin") || ends_with(path, ".pth") || ends_with(path, ".ckpt"))
    throw Error(fmt::format("'{}' is a PyTorch pickle, which amor-run does not read: rewrite it as safetensors "
                            "with /usr/bin/python3 scripts/torch_to_safetensors.py '{}' OUT.safetensors",
                            path, path));
}

int run(const std::vector<std::string>& args, std::ostream& out) {
  std::string from, to, model_path, gates_json;
  std::vector<std::string> pos;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw Usage(a + " needs a value");
      return args[++i];
    };
    if (a == "--from") from = value();
    else if (a == "--to") to = value();
    else if (a == "--model") model_path = value();
    else if (a == "--gates") gates_json = value();
    else if (a == "--help" || a == "-h") throw Usage("");
    else if (a.rfind("--", 0) == 0) throw Usage("unknown option '" + a + "'");
    else pos.push_back(a);
  }
  if ((from.empty()) == (to.empty())) throw Usage("give one of --from authors, --to authors");
  if ((from.empty() ? to : from) != "authors") throw Usage("the only other layout is 'authors'");
  if (pos.size() != 2) throw Usage("give IN and OUT");
  const std::string &in = pos[0], &out_path = pos[1];
  refuse_pickle(in);
  SafetensorsFile file = load_safetensors(in);

  model::ModelConfig cfg;
  if (!model_path.empty()) {
    cfg = model_from_run_config(model_path);
  } else {
    auto it = file.metadata.find("model_config");
    if (!from.empty() || it == file.metadata.end())
      throw Usage("--model RUN_CONFIG is needed (" + in + " has no model_config metadata)");
    cfg = config::load_run_config_json("{\"model\": " + it->second + "}", in + " model_config").model;
  }
  // Built for its parameter names and shapes only: bf16, the smallest the host keeps.
  auto m = model::build_model(cfg, DType::BF16);
  if (!from.empty()) {
    model::OursWeights w = model::authors_to_ours(file, cfg, m->params(), in);
    save_safetensors(out_path, w.tensors,
                     {{"format", "amor-run model weights"},
                      {"model_config", model::to_json(cfg).dump()},
                      {"amor_run_version", version()},
                      {"parameters", std::to_string(m->params().numel())},
                      {"amor_gates", model::gate_state_to_json(w.gates)},
                      {"converted_from", "AMOR authors' state dict (HaoranZhengRaul/AMOR amor.py): " + in}});
    out << "wrote " << out_path << ": " << w.tensors.size() << " tensors, " << w.gates.size() << " gate states\n";
    return 0;
  }
  if (gates_json.empty()) {
    auto it = file.metadata.find("amor_gates");
    if (it == file.metadata.end())
      throw Error(fmt::format("{}: no amor_gates metadata (the gates' EMA thresholds, which the authors' "
                              "checkpoint carries): pass --gates '[{{\"m\":..,\"s\":..}},...]', e.g. the "
                              "amor_gates of the run's checkpoint",
                              in));
    gates_json = it->second;
  }
  auto t = model::ours_to_authors(file, model::gate_state_from_json(gates_json), cfg, m->params(), in);
  save_safetensors(out_path, t, {{"format", "pt"}});
  out << "wrote " << out_path << ": " << t.size() << " tensors (authors' names)\n";
  return 0;
}

}  // namespace

bool is_convert_weights(int argc, const char* const* argv) {
  return argc > 1 && std::strcmp(argv[1], "convert-weights") == 0;
}

int convert_weights_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return run_subcommand("convert-weights", kUsage, out, err, [&] { return run(args, out); });
}

}  // namespace amor
