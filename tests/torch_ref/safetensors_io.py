"""Read and write safetensors files with json + numpy (Debian has no safetensors package)."""
import json
import struct

import numpy as np
import torch

_DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U8": np.uint8,
           "F16": np.float16}


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        if e["dtype"] == "BF16":
            raw = np.frombuffer(data[base + b:base + end], dtype=np.uint16).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(data[base + b:base + end], dtype=_DTYPES[e["dtype"]])
        out[name] = torch.from_numpy(arr.copy().reshape(e["shape"]))
    return out
