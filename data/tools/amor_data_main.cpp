// amor-data: prepares token shards (convert), checks and describes them (stats) and exports the
// built-in corpus (export-kjv). The command itself lives in data/shards/amor_data_cli.cpp so that
// tests can run it in-process; `amor-data --help` lists the options.
#include <unistd.h>

#include <iostream>

#include "data/shards/amor_data_cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return amor::shards::amor_data_main(args, std::cout, std::cerr, ::isatty(STDERR_FILENO) != 0);
}
