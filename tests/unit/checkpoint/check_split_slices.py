#!/usr/bin/env python3
"""check_split_slices.py SRC RANKDIR — every rank file's piece of a
parameter cut out of a bigger stored tensor (a "fold" item of its
"tpx.tensors" entry whose box reaches past the parameter: negative offsets,
or an end past its global shape) holds, element by element, the stored
tensor of SRC at the parameter's offset in it: piece[i] = stored[global
index of i - the item's offsets]. No such stored tensor is in a rank file
under its own name. Reads the safetensors headers and bytes itself (stdlib
only; any dtype, compared as bytes). Exit 0 when every element matches, 1
otherwise (the first mismatch printed)."""
import glob
import itertools
import json
import os
import struct
import sys

SIZES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "U8": 1}


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def tensors(paths):
    out = {}
    for p in paths:
        header, data = load(p)
        for name, t in header.items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            out[name] = (t["shape"], SIZES[t["dtype"]], data[a:b])
    return out


def flat(idx, shape):
    i = 0
    for x, n in zip(idx, shape):
        i = i * n + x
    return i


def main():
    src, rankdir = sys.argv[1], sys.argv[2]
    srcs = tensors(sorted(glob.glob(os.path.join(src, "*.safetensors"))))
    checked, parts = 0, set()
    for path in sorted(glob.glob(os.path.join(rankdir, "rank-*.safetensors"))):
        header, data = load(path)
        meta = json.loads(header["__metadata__"]["tpx.tensors"])
        for name, m in meta.items():
            for item in m.get("fold", []):
                o, s, g = item["offsets"], item["shape"], m["global_shape"]
                if len(s) != len(g) or item.get("transpose"):
                    continue
                if all(x >= 0 and x + n <= gg for x, n, gg in zip(o, s, g)):
                    continue  # a box inside the parameter: not a part
                parts.add(item["name"])
                t = header[name]
                shape, sz = t["shape"], SIZES[t["dtype"]]
                piece = data[t["data_offsets"][0]:t["data_offsets"][1]]
                s_shape, _, stored = srcs[item["name"]]
                for k, loc in enumerate(itertools.product(*map(range, shape))):
                    glob_idx = [a + b for a, b in zip(m["offsets"], loc)]
                    at = flat([a - b for a, b in zip(glob_idx, o)], s_shape)
                    if piece[k * sz:(k + 1) * sz] != stored[at * sz:(at + 1) * sz]:
                        print("%s: %s%s differs from %s" %
                              (path, name, glob_idx, item["name"]))
                        return 1
                    checked += 1
        for p in parts:
            if p in header:
                print("%s: the stored tensor %s is there on its own" % (path, p))
                return 1
    if checked == 0:
        print("no parameter cut from a stored tensor under %s" % rankdir)
        return 1
    print("%d elements of %d stored tensors cut into parameters hold them"
          % (checked, len(parts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
