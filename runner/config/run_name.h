// Readable, filesystem-safe, stable run names built from a run's swept values.
//
// Each swept key contributes one part, in sweep order (grid keys in file order, then zip keys,
// then seeds), joined by '-':
//   enum values stand alone          model.kind=amor           -> amor
//   numbers follow the short key     model.d_model=768         -> d_model768, train.lr=0.001 -> lr0.001
//   booleans                         model.recompute=true      -> recompute (false: no_recompute)
//   strings and lists: key_value     model.pattern=MMMA        -> pattern_MMMA, [a, b] -> tasks_a+b
//   empty string or list             checkpoint.signal=""      -> signal_none
// e.g. {kind: amor, d_model: 768, seed: 1} -> "amor-d_model768-seed1". A run with no swept key is
// "base". The short key is the last dotted component, lengthened leftwards only when two swept
// keys of the sweep share it (model.head_dim and model.mamba2.head_dim -> model.head_dim,
// mamba2.head_dim). Characters outside [A-Za-z0-9._+-] become '_'; names are cut at 200 bytes.
// Every key of a sweep axis takes part, even one with a single value, so adding a value to an axis
// later keeps the names (and directories) of the runs that already exist; except a model.* key
// the run's model kind does not read (model::kind_uses_key, models/lm/model_kinds.h), which names
// none of that kind's runs (it stays in their config and hash). A named variant (sweep.variants)
// gives its name instead of its keys' parts. expand_sweep (sweep.cpp) applies these rules.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "runner/config/schema.h"

namespace amor::config {

std::vector<std::string> short_names(const std::vector<std::string>& keys);
std::string name_part(const std::string& short_name, const Field& field, const FieldValue& value);
std::string join_run_name(const std::vector<std::string>& parts);
std::string sanitize_name(std::string_view s);

}  // namespace amor::config
