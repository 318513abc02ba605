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
import itertools
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from rank_files import SIZES, rank_files, source_tensors  # noqa: E402


def flat(idx, shape):
    i = 0
    for x, n in zip(idx, shape):
        i = i * n + x
    return i


def main():
    src, rankdir = sys.argv[1], sys.argv[2]
    srcs = source_tensors(src)
    checked, parts = 0, set()
    for path, header, data, meta in rank_files(rankdir):
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
