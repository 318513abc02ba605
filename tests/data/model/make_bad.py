#!/usr/bin/env python3
"""Writes the data-driven bad-input cases under tests/data/model/bad/.

Each case is a folder holding its input (a model.safetensors, an index plus
shards, or a config.json) and `expected`: one substring per line that the
error message must contain (the file name and the offending key/tensor).
The generated files are committed; rerun this after changing a case:
    python3 tests/data/model/make_bad.py
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
BAD = os.path.join(HERE, "bad")


def st_bytes(header, data_len=None, header_len=None, raw_header=None):
    """A safetensors file: u64 LE header length, header, data bytes."""
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    if data_len is None:
        data_len = 0
        if isinstance(header, dict):
            for k, v in header.items():
                if isinstance(v, dict) and isinstance(v.get("data_offsets"), list):
                    offs = [o for o in v["data_offsets"] if isinstance(o, int)]
                    if offs:
                        data_len = max(data_len, max(offs))
    n = len(h) if header_len is None else header_len
    return struct.pack("<Q", n) + h + b"\0" * data_len


def case(name, files, expected):
    d = os.path.join(BAD, name)
    os.makedirs(d, exist_ok=True)
    for fname, content in files.items():
        with open(os.path.join(d, fname), "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
    with open(os.path.join(d, "expected"), "w") as f:
        f.write("\n".join(expected) + "\n")


def t(dtype="F32", shape=(2, 2), offs=(0, 16)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offs)}


ST = "model.safetensors"
IDX = "model.safetensors.index.json"


def main():
    if os.path.isdir(BAD):
        shutil.rmtree(BAD)
    ok = {"a.weight": t()}
    case("st_truncated_json", {ST: st_bytes(None, 16, raw_header=b'{"a.weight": {"dtype": "F32", "sha')},
         [ST, "not valid JSON"])
    case("st_header_not_object", {ST: st_bytes([1, 2])}, [ST, "must be a JSON object"])
    case("st_entry_not_object", {ST: st_bytes({"a.weight": 3})}, [ST, "'a.weight'", "must be an object"])
    case("st_metadata_not_object", {ST: st_bytes({"__metadata__": [1], **ok})}, [ST, "__metadata__"])
    case("st_dtype_not_string", {ST: st_bytes({"a.weight": {"dtype": 5, "shape": [2], "data_offsets": [0, 8]}})},
         [ST, "'a.weight'", "dtype"])
    case("st_unknown_dtype", {ST: st_bytes({"a.weight": t(dtype="Q4_K")})}, [ST, "'a.weight'", "unknown dtype 'Q4_K'"])
    case("st_shape_not_list", {ST: st_bytes({"a.weight": {"dtype": "F32", "shape": "2x2", "data_offsets": [0, 16]}})},
         [ST, "'a.weight'", "\"shape\" must be a list"])
    case("st_shape_item_not_int", {ST: st_bytes({"a.weight": t(shape=(2, "2"))})},
         [ST, "'a.weight'", "\"shape\"[1]"])
    case("st_shape_float", {ST: st_bytes({"a.weight": t(shape=(2, 2.0))})}, [ST, "'a.weight'", "\"shape\"[1]"])
    case("st_negative_dim", {ST: st_bytes({"a.weight": t(shape=(-2, 4))})}, [ST, "'a.weight'", "negative"])
    case("st_huge_dim", {ST: st_bytes({"a.weight": t(shape=(1 << 62, 4))})}, [ST, "'a.weight'", "too large"])
    case("st_huge_dim_literal", {ST: st_bytes(None, 16, raw_header=b'{"a.weight": {"dtype": "F32", "shape": '
                                              b'[100000000000000000000000], "data_offsets": [0, 16]}}')},
         [ST, "too big"])
    case("st_duplicate_key", {ST: st_bytes(None, 16, raw_header=b'{"a.weight": {"dtype": "F32", "shape": [2, 2], '
                                           b'"data_offsets": [0, 16]}, "a.weight": {"dtype": "F32", "shape": [4], '
                                           b'"data_offsets": [0, 16]}}')},
         [ST, "duplicate object key", "a.weight"])
    case("idx_duplicate_key", {IDX: '{"weight_map": {"a.weight": "x.safetensors", "a.weight": "y.safetensors"}}'},
         [IDX, "duplicate object key", "a.weight"])
    case("st_too_many_dims", {ST: st_bytes({"a.weight": t(shape=(1,) * 9, offs=(0, 4))})}, [ST, "'a.weight'", "9 dims"])
    case("st_header_len_beyond_file", {ST: st_bytes(ok, header_len=1000)}, [ST, "beyond the end of the file"])
    case("st_header_over_100mb", {ST: st_bytes(ok, header_len=200 * 1024 * 1024)}, [ST, "100 MB"])
    case("st_short_file", {ST: b"\x10\x00\x00"}, [ST, "too short"])
    case("st_offsets_overlap", {ST: st_bytes({"a.weight": t(offs=(0, 16)), "b.weight": t(offs=(8, 24))})},
         [ST, "'a.weight'", "'b.weight'", "overlapping"])
    case("st_offsets_beyond_file", {ST: st_bytes({"a.weight": t(offs=(16, 32))}, data_len=20)},
         [ST, "'a.weight'", "beyond the end of the file"])
    case("st_offsets_reversed", {ST: st_bytes({"a.weight": t(offs=(16, 0))}, data_len=16)},
         [ST, "'a.weight'", "begin <= end"])
    case("st_offsets_wrong_arity", {ST: st_bytes({"a.weight": t(offs=(0,))}, data_len=16)},
         [ST, "'a.weight'", "[begin, end]"])
    case("st_offsets_negative", {ST: st_bytes({"a.weight": t(offs=(-16, 0))}, data_len=16)},
         [ST, "'a.weight'", "begin <= end"])
    case("st_offsets_size_mismatch", {ST: st_bytes({"a.weight": t(shape=(2, 2), offs=(0, 8))})},
         [ST, "'a.weight'", "span 8 bytes", "needs 16"])
    case("st_empty_atom_name", {ST: st_bytes({"a..weight": t()})}, [ST, "'a..weight'", "invalid name"])
    case("dir_empty", {}, ["dir_empty", "neither"])

    shard = "model-00001-of-00002.safetensors"
    shard2 = "model-00002-of-00002.safetensors"
    case("idx_missing_shard",
         {IDX: json.dumps({"weight_map": {"a.weight": shard, "b.weight": shard2}}), shard: st_bytes(ok)},
         [IDX, "b.weight", shard2, "missing"])
    case("idx_truncated", {IDX: '{"weight_map": {"a.weight": "x.safe'}, [IDX, "invalid JSON"])
    case("idx_not_object", {IDX: "[1, 2]"}, [IDX, "weight_map"])
    case("idx_weight_map_not_object", {IDX: json.dumps({"weight_map": ["a.weight"]})}, [IDX, "weight_map"])
    case("idx_weight_map_value_type", {IDX: json.dumps({"weight_map": {"a.weight": 3}}), shard: st_bytes(ok)},
         [IDX, "a.weight", "file name string"])
    case("idx_path_traversal", {IDX: json.dumps({"weight_map": {"a.weight": "../" + shard}})},
         [IDX, "a.weight", "../"])
    case("idx_tensor_not_in_shard",
         {IDX: json.dumps({"weight_map": {"a.weight": shard, "z.weight": shard}}), shard: st_bytes(ok)},
         [IDX, "'z.weight'", shard])
    case("idx_duplicate_across_shards",
         {IDX: json.dumps({"weight_map": {"a.weight": shard, "b.weight": shard2}}),
          shard: st_bytes(ok), shard2: st_bytes({"a.weight": t(), "b.weight": t(offs=(16, 32))})},
         [shard2, "'a.weight'", "also appears in", shard])
    case("idx_bad_shard_header",
         {IDX: json.dumps({"weight_map": {"a.weight": shard}}), shard: st_bytes({"a.weight": t(dtype="X9")})},
         [shard, "'a.weight'", "unknown dtype"])

    case("cfg_truncated", {"config.json": '{"architectures": ["LlamaForCausalLM"], "hidden_size": 20'},
         ["config.json", "invalid JSON"])
    case("cfg_not_object", {"config.json": '[{"hidden_size": 1}]'}, ["config.json", "must be a JSON object"])
    case("cfg_scalar", {"config.json": '42'}, ["config.json", "invalid JSON"])
    case("cfg_architectures_type", {"config.json": '{"architectures": "LlamaForCausalLM"}'},
         ["config.json", "\"architectures\""])
    case("cfg_architectures_item", {"config.json": '{"architectures": ["A", 3]}'},
         ["config.json", "\"architectures\"[1]"])
    case("cfg_glued_token", {"config.json": '{"rope_theta": Infinityx}'}, ["config.json", "invalid JSON"])
    case("cfg_empty", {"config.json": ''}, ["config.json", "invalid JSON"])


if __name__ == "__main__":
    main()
