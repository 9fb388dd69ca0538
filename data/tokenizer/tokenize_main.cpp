// build/bin/tokenize: see data/tokenizer/tokenize_command.h.
#include <iostream>

#include "data/tokenizer/tokenize_command.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  return amor::tokenize_command(std::vector<std::string>(argv + 1, argv + argc), std::cin,
                                std::cout, std::cerr);
}
