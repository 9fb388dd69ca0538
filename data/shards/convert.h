// Text -> token shards: what `amor-data convert` does.
//
// Documents (corpus_inputs.h) are tokenised one at a time and appended, each followed by EOS, to
// train-NNNNN.tok or valid-NNNNN.tok in the output folder. The validation split takes documents
// at an even stride: document i (counting non-empty documents from 0) goes to valid when
// floor(i*f) steps up from floor((i-1)*f), and document 0 always does, so f = 0.01 sends
// documents 0, 100, 200, ... to valid: exactly about the fraction f, spread over the whole corpus,
// the same on every machine, and never empty when f > 0.
//
// A shard is closed once the next document would take it past shard_tokens (a longer document
// gets a shard of its own; documents never straddle shards).
//
// Nothing half-written: every shard is written to a hidden temporary file, and they are renamed
// into place only after the whole corpus has been converted. On any error the temporaries are
// deleted (and the output folder, if this call created it and it is empty). An output folder
// already holding shards is refused unless `overwrite` is set; then stale shards of an earlier,
// larger conversion are removed as well.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/shards/corpus_inputs.h"
#include "data/shards/token_encoder.h"

namespace amor::shards {

struct ConvertProgress {
  uint64_t bytes_done = 0, bytes_total = 0;
  uint64_t documents = 0, tokens = 0;
  double seconds = 0;
};

struct ConvertOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  double valid_fraction = 0.01;  // in [0, 1)
  uint64_t shard_tokens = 100'000'000;
  std::string jsonl_field = "text";
  TextDocs text_docs = TextDocs::File;  // how plain text files become documents
  bool overwrite = false;
  std::function<void(const ConvertProgress&)> progress;  // called every ~0.25 s and at the end
};

struct SplitStats {
  uint64_t documents = 0, tokens = 0;
  std::vector<std::string> files;
};

struct ConvertStats {
  std::string tokenizer;
  uint32_t vocab_size = 0;
  uint64_t input_files = 0, input_bytes = 0;
  uint64_t empty_documents = 0;  // skipped: they would be a lone EOS
  SplitStats train, valid;
  double seconds = 0;
};

ConvertStats convert_corpus(const ConvertOptions& options, const TokenEncoder& encoder);

// Whether non-empty document number i goes to the validation split (see the top comment).
bool is_validation_document(uint64_t i, double valid_fraction);

// The statistics block `amor-data convert` prints.
std::string format_convert_stats(const ConvertStats& s);

}  // namespace amor::shards
