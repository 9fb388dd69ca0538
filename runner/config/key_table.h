// The key table of runner/config/README.md ("Keys"), made from the declare_keys listings: one row
// per key in listing order with its type or values, default and doc. `amor-run
// --print-config-keys` prints it; config_key_table_test fails when the README's copy differs, so
// the README cannot drift from the declarations.
#pragma once
#include <string>

#include "runner/config/schema.h"

namespace amor::config {

// "int ≥ 1", "float in [0, 1)", "gdn \| mamba2", "list of int ≥ 1", "string of A, M, G", ...
std::string describe_values(const Field& field);

// The whole Markdown table, header included, each row ending in "\n".
std::string key_table_markdown();

}  // namespace amor::config
