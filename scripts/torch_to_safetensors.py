#!/usr/bin/python3
"""Rewrite a PyTorch checkpoint (.pt / .bin / .pth: a pickled state dict) as safetensors, for
`amor-run convert-weights --from authors` (amor-run reads no pickles: unpickling runs code).

Usage: /usr/bin/python3 scripts/torch_to_safetensors.py IN.pt OUT.safetensors [--key KEY]

The state dict is the file itself or, when it is a dict holding one, IN[KEY] (default: the first
of 'model', 'state_dict', 'model_state_dict' present). Tensors keep their names, shapes and
dtypes (bf16 included); a tensor listed under two names (the authors' tied embed.weight and
lm_head.weight) is written under both. Needs torch; writes the file with numpy only.
"""
import json
import struct
import sys

import torch

_CODES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}


def state_dict_of(obj, key):
    if isinstance(obj, dict) and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return obj
    for k in ([key] if key else ["model", "state_dict", "model_state_dict"]):
        if isinstance(obj, dict) and k in obj:
            return obj[k]
    sys.exit(f"torch_to_safetensors: no state dict found (top-level keys: {list(obj)[:20]}); pass --key")


def main():
    args = sys.argv[1:]
    key = None
    if "--key" in args:
        i = args.index("--key")
        key = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    sd = state_dict_of(torch.load(args[0], map_location="cpu", weights_only=True)
                       if "weights_only" in torch.load.__code__.co_varnames
                       else torch.load(args[0], map_location="cpu"), key)
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in sd.items():
        t = t.detach().contiguous().cpu()
        if t.dtype not in _CODES:
            sys.exit(f"torch_to_safetensors: '{name}' has dtype {t.dtype}, which safetensors here does not take")
        # bf16 has no numpy type: its bytes go through int16.
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": _CODES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(args[1], "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    print(f"wrote {args[1]}: {len(sd)} tensors")


if __name__ == "__main__":
    main()
