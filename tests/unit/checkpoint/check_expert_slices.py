#!/usr/bin/env python3
"""check_expert_slices.py SRC RANKDIR — every rank file's slice of the grouped
experts (…experts.gate_and_up_projs [E, H, 2I], …experts.down_projs
[E, I, H]) holds, element by element, the transposed Hugging Face per-expert
tensors of SRC: gate_and_up_projs[e, h, j] = gate_proj_e[j, h] for j < I,
up_proj_e[j - I, h] after; down_projs[e, i, h] = down_proj_e[h, i]. Reads the
safetensors headers and bytes itself (stdlib only; any dtype, compared as
bytes), the slice's place from the rank file's "tpx.tensors" offsets. Exit 0
when every element matches, 1 otherwise (the first mismatch printed)."""
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from rank_files import SIZES, rank_files, source_tensors  # noqa: E402


def main():
    src, rankdir = sys.argv[1], sys.argv[2]
    srcs = source_tensors(src)
    checked = 0
    for path, header, data, meta in rank_files(rankdir):
        for name, t in header.items():
            gu = name.endswith(".experts.gate_and_up_projs")
            if not gu and not name.endswith(".experts.down_projs"):
                continue
            prefix = name.rsplit(".", 1)[0]
            shape, sz = t["shape"], SIZES[t["dtype"]]
            a = t["data_offsets"][0]
            piece = data[a:t["data_offsets"][1]]
            off = meta[name]["offsets"]
            g = meta[name]["global_shape"]
            big_i = g[2] // 2 if gu else g[1]
            k = 0
            for e in range(off[0], off[0] + shape[0]):
                for x in range(off[1], off[1] + shape[1]):
                    for y in range(off[2], off[2] + shape[2]):
                        if gu:
                            part = "gate_proj" if y < big_i else "up_proj"
                            s_shape, _, s = srcs["%s.%d.%s.weight" % (prefix, e, part)]
                            i = (y % big_i) * s_shape[1] + x
                        else:
                            s_shape, _, s = srcs["%s.%d.down_proj.weight" % (prefix, e)]
                            i = y * s_shape[1] + x
                        if piece[k * sz:(k + 1) * sz] != s[i * sz:(i + 1) * sz]:
                            print("%s: %s[%d, %d, %d] differs from the source"
                                  % (path, name, e, x, y))
                            return 1
                        k += 1
                        checked += 1
    if checked == 0:
        print("no expert slices found under %s" % rankdir)
        return 1
    print("%d expert elements hold the transposed per-expert tensors" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
