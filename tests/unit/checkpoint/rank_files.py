"""rank_files.py — what check_expert_slices.py and check_split_slices.py
share (imported, not run): reading safetensors files by hand (stdlib only;
any dtype, its elements kept as bytes) and walking a directory of tpx rank
files with their "tpx.tensors" metadata."""
import glob
import json
import os
import struct

SIZES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "U8": 1}


def load(path):
    """(header dict, the bytes after the header) of one safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def source_tensors(src):
    """name -> (shape, element size, bytes) of every tensor in the
    *.safetensors files of the directory src."""
    out = {}
    for p in sorted(glob.glob(os.path.join(src, "*.safetensors"))):
        header, data = load(p)
        for name, t in header.items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            out[name] = (t["shape"], SIZES[t["dtype"]], data[a:b])
    return out


def rank_files(rankdir):
    """(path, header, data, tpx.tensors metadata) of each rank file of
    rankdir, in rank order."""
    for path in sorted(glob.glob(os.path.join(rankdir, "rank-*.safetensors"))):
        header, data = load(path)
        yield path, header, data, json.loads(header["__metadata__"]["tpx.tensors"])
