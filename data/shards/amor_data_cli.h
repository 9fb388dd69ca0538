// The `amor-data` command, as a function so that tests run it in-process and check its output and
// exit status (data/tools/amor_data_main.cpp is only the process entry point).
//
//   amor-data convert --tokenizer SPEC --out DIR [--valid-fraction F] [--shard-tokens N]
//                     [--field NAME] [--text-docs file|paragraphs|lines] [--overwrite] [--quiet]
//                     INPUT...
//   amor-data stats DIR_OR_FILE...
//   amor-data export-kjv --out FILE.jsonl
//
// Exit status: 0 success, 1 an error in the data (message on err), 2 a usage error.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace amor::shards {

// args excludes the program name. `tty`: err is a terminal (progress redraws one line in place;
// otherwise it prints a line at each quarter of the input).
int amor_data_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, bool tty);

}  // namespace amor::shards
