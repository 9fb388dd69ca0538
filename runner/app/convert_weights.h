// `amor-run convert-weights`: the AMOR authors' checkpoints (amor.py's state dict as safetensors)
// to amor-run weights files and back (models/io/authors_layout.h has the layout):
//
//   amor-run convert-weights --from authors --model RUN_CONFIG IN.safetensors OUT.safetensors
//   amor-run convert-weights --to authors [--model RUN_CONFIG] [--gates JSON] IN.safetensors OUT.safetensors
//
// RUN_CONFIG: a sweep file (.yaml/.yml, expanded as amor-run does, presets resolved; its runs must
// share one model) or a resolved run config (.json: a run folder's config.json) whose model
// (model.kind amor) describes the checkpoint; --to authors takes it
// from IN's model_config metadata when not given. The gates' EMA thresholds go to OUT's
// "amor_gates" metadata (--from) or to the authors' gate buffers (--to: from IN's "amor_gates",
// or --gates '[{"m":..,"s":..},...]', e.g. a checkpoint's amor_gates). A .pt/.bin input is refused
// naming scripts/torch_to_safetensors.py, which rewrites it as safetensors.
// Exit status: 0 written, 1 the weights do not fit (message on err), 2 a usage error.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace amor {

bool is_convert_weights(int argc, const char* const* argv);
// args: after "convert-weights".
int convert_weights_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace amor
