// The `tokenize` command (build/bin/tokenize): encode text files or stdin with any tokenizer spec
// and print the ids, decode ids back to text, or report throughput. Kept out of main() so tests
// can run it on strings.
//
//   tokenize [--tokenizer SPEC] [--special] [--stats] [FILE...]   ids, one line per input
//   tokenize [--tokenizer SPEC] --decode [FILE...]                ids (whitespace-separated) ->
//   text
//
// SPEC as make_tokenizer() takes it (default "llama3"); "-" or no FILE reads stdin.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace amor {

// Returns the exit status: 0, 1 for errors (message on err), 2 for usage errors.
int tokenize_command(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
                     std::ostream& err);

}  // namespace amor
