#!/usr/bin/python3
"""Goldens for `llminfer info --json [--all]` on every model in ../shared/models.

Three sources, none of them llminfer:
  * the llama.cpp oracle:  node ../shared/tools/llamacpp-oracle/oracle.mjs info FILE.gguf
    (n_params, n_vocab, bos, eos, n_layer, n_embd, n_head, n_head_kv, n_ctx_train, tensor_count,
    architecture, name, has_chat_template, size_bytes = bytes of tensor data, hparams, eog_ids);
  * the fixtures' own GGUF reader: ../shared/tools/fixtures/gguf.py (GGUFReader: every tensor's
    name, type, shape, offset, bytes; metadata key count);
  * the fixture descriptions: ../shared/tools/fixtures/README.md (bytes and sha256 of every file),
    and, for Hugging Face / MLX directories, their safetensors headers and config.json read here
    with the standard library; their hyperparameters and vocabulary come from the oracle run on
    the F32 GGUF twin that hf.py wrote beside them with exactly the same numbers.

Regenerate (from the repository root, with the oracle installed):
    /usr/bin/python3 tests/goldens/info/make_goldens.py --shared ../shared > tests/goldens/info/info.json
"""
import argparse
import hashlib
import json
import os
import re
import struct
import subprocess
import sys

# Hugging Face / MLX directory -> its F32 GGUF twin (same weights, same tokenizer; see fixtures README).
HF_TWINS = {
    "hf/smollm2-tiny/hf-bf16": "hf/smollm2-tiny/oracle-f32.gguf",
    "hf/smollm2-tiny/mlx-4bit": "hf/smollm2-tiny/mlx-4bit-oracle-f32.gguf",
}


def ggml_type_name(t_names, t):
    n = t_names[t].lower()
    return n[:-2] + "_K" if n.endswith("_k") else n


def oracle_info(shared, path):
    out = subprocess.run(["node", "oracle.mjs", "info", path], cwd=os.path.join(shared, "tools/llamacpp-oracle"),
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def readme_table(shared):
    rows = {}
    text = open(os.path.join(shared, "tools/fixtures/README.md"), encoding="utf-8").read()
    for m in re.finditer(r"^\| `([^`]+)` \| (\d+) \| `([0-9a-f]{64})` \|", text, re.M):
        rows[m.group(1)] = (int(m.group(2)), m.group(3))
    return rows


def check_file(shared, rel, table):
    """Size and sha256 of a model file, cross-checked against the fixture README."""
    p = os.path.join(shared, "models", rel)
    data = open(p, "rb").read()
    size, sha = len(data), hashlib.sha256(data).hexdigest()
    if rel not in table:
        sys.exit("make_goldens: %s is not described in the fixtures README" % rel)
    if table[rel] != (size, sha):
        sys.exit("make_goldens: %s differs from the fixtures README (%s vs %s)" % (rel, (size, sha), table[rel]))
    return size


def from_oracle(o):
    ah = o["arch_hparams"]
    att = ah.get("attention", {})
    head_dim = att.get("key_length", o["n_embd"] // o["n_head"])
    return {
        "architecture": o["architecture"],
        "n_params": o["n_params"],
        "n_tensors": o["tensor_count"],
        "hparams": {"n_layer": o["n_layer"], "n_embd": o["n_embd"], "n_head": o["n_head"], "n_head_kv": o["n_head_kv"],
                    "n_ff": ah["feed_forward_length"], "n_ctx_train": o["n_ctx_train"], "head_dim": head_dim,
                    "rope_freq_base": ah.get("rope", {}).get("freq_base", 10000.0)},
        "tokenizer": {"model": o["tokenizer_model"], "n_vocab": o["n_vocab"], "bos": o["bos"], "eos": o["eos"]},
        "chat_template": o["has_chat_template"],
        "eog_ids": o["eog_ids"],
    }


def gguf_golden(shared, rel, table, gguf):
    path = os.path.join(shared, "models", rel)
    o = oracle_info(shared, path)
    g = from_oracle(o)
    g["format"] = "gguf"
    g["name"] = o["name"]
    g["file_bytes"] = check_file(shared, rel, table)
    g["tensor_bytes"] = o["size_bytes"]
    g["tokenizer"]["pre"] = o.get("tokenizer_pre", "")
    r = gguf.GGUFReader(path)
    counts = {}
    tensors = []
    for t in r.tensors:
        name = ggml_type_name(gguf.T_NAMES, t["type"])
        counts[name] = counts.get(name, 0) + 1
        tensors.append([t["name"], name, t["ne"], r.data_offset + t["offset"], t["nbytes"]])
    g["tensor_types"] = counts
    g["n_metadata"] = len(r.kv)
    g["tensors"] = tensors
    if len(tensors) != g["n_tensors"] or sum(t[4] for t in tensors) != g["tensor_bytes"]:
        sys.exit("make_goldens: gguf.py and llama.cpp disagree on " + rel)
    return g


def safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def hf_golden(shared, rel, table, twin):
    d = os.path.join(shared, "models", rel)
    cfg = json.load(open(os.path.join(d, "config.json"), encoding="utf-8"))
    q = cfg.get("quantization") or {}
    files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    tensors = {}
    for f in files:
        for k, v in safetensors_header(os.path.join(d, f)).items():
            if k != "__metadata__":
                tensors[k] = v
    counts, n_params, n_tensors, tensor_bytes = {}, 0, 0, 0
    st_names = {"F32": "f32", "F16": "f16", "BF16": "bf16", "U32": "u32", "I32": "i32"}
    for k, v in tensors.items():
        b, e = v["data_offsets"]
        tensor_bytes += e - b
        base = k.rsplit(".", 1)[0]
        if (k.endswith(".scales") or k.endswith(".biases")) and tensors.get(base + ".weight", {}).get("dtype") == "U32":
            continue  # part of an MLX triple
        n_tensors += 1
        shape = v["shape"]
        if v["dtype"] == "U32" and base + ".scales" in tensors:
            bits = q["bits"]
            typ = "mlx_q%d" % bits
            n = shape[0] * shape[1] * 32 // bits
        else:
            typ = st_names[v["dtype"]]
            n = 1
            for s in shape:
                n *= s
        counts[typ] = counts.get(typ, 0) + 1
        n_params += n
    o = oracle_info(shared, os.path.join(shared, "models", twin))
    g = from_oracle(o)
    if g["n_params"] != n_params or g["n_tensors"] != n_tensors:
        sys.exit("make_goldens: %s and its twin %s disagree" % (rel, twin))
    g["format"] = "safetensors"
    g["name"] = os.path.basename(rel)  # a directory's name (it has no general.name)
    g["file_bytes"] = sum(check_file(shared, rel + "/" + f, table) for f in files)
    g["tensor_bytes"] = tensor_bytes
    g["tensor_types"] = counts
    g["twin"] = twin
    return g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default="../shared")
    a = ap.parse_args()
    shared = os.path.abspath(a.shared)
    sys.path.insert(0, os.path.join(shared, "tools/fixtures"))
    import gguf  # the fixtures' reader
    table = readme_table(shared)
    models = os.path.join(shared, "models")
    out = {}
    for root, dirs, fs in os.walk(models):
        dirs.sort()
        for f in sorted(fs):
            if f.endswith(".gguf"):
                rel = os.path.relpath(os.path.join(root, f), models)
                out[rel] = gguf_golden(shared, rel, table, gguf)
        if "config.json" in fs:
            rel = os.path.relpath(root, models)
            out[rel] = hf_golden(shared, rel, table, HF_TWINS[rel])
    json.dump({"command": "/usr/bin/python3 tests/goldens/info/make_goldens.py --shared ../shared",
               "llama_cpp_build": oracle_info(shared, os.path.join(models, "stories260K.gguf"))["llama_cpp_build"]["llama_cpp_release"],
               "models": out}, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
