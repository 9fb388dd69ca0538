#!/usr/bin/env bash
# Prepares the built-in corpus: the King James Bible from Debian's bible-kjv-text package (read
# through its `bible` program, package bible-kjv), one document per chapter, tokenised into
# train/valid token shards with amor-data. Idempotent: an OUT_DIR that already holds shards is left
# as it is (pass --force to redo it).
#
#   scripts/prepare_corpus.sh [--tokenizer SPEC] [--amor-data PATH] [--force] [OUT_DIR]
#
#   --tokenizer SPEC   byte (default) | gpt2 | llama3 | path/to/tokenizer.json
#   --amor-data PATH   the amor-data binary (default: build/bin/amor-data; scripts/setup.sh builds it)
#   OUT_DIR            default: build/corpus/kjv-<tokenizer>
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tokenizer=byte
amor_data="$root/build/bin/amor-data"
force=0
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tokenizer) tokenizer="$2"; shift ;;
    --amor-data) amor_data="$2"; shift ;;
    --force) force=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "prepare_corpus.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "prepare_corpus.sh: more than one OUT_DIR ('$out', '$1')" >&2; exit 2; }
       out="$1" ;;
  esac
  shift
done
if [ -z "$out" ]; then
  # Named as the shard headers name the tokenizer: ".../<model>/tokenizer.json" -> <model>.
  name=$(basename "$tokenizer" .json)
  [ "$name" = tokenizer ] && [[ "$tokenizer" == */* ]] && name=$(basename "$(dirname "$tokenizer")")
  out="$root/build/corpus/kjv-$name"
fi

[ -x "$amor_data" ] || { echo "prepare_corpus.sh: $amor_data not found; build first (bash scripts/setup.sh)" >&2; exit 1; }

if [ -e "$out/train-00000.tok" ] && [ "$force" = 0 ]; then
  echo "prepare_corpus.sh: $out already prepared (--force to redo)"
  "$amor_data" stats "$out"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$amor_data" export-kjv --out "$tmp/kjv.jsonl"
overwrite=()
[ "$force" = 1 ] && overwrite=(--overwrite)
"$amor_data" convert --tokenizer "$tokenizer" --out "$out" --valid-fraction 0.01 "${overwrite[@]}" "$tmp/kjv.jsonl"
