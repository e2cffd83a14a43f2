#!/usr/bin/python3
"""Goldens for `llminfer info --json [--all]` on every model file the tests use: the committed
third_party/stories260K/*.gguf and everything `make fixtures` writes (tools/fixtures/gen.py).

Three sources, none of them llminfer:
  * the llama.cpp oracle:  node oracle.mjs info FILE.gguf  (llamacpp-oracle, see --oracle)
    (n_params, n_vocab, bos, eos, n_layer, n_embd, n_head, n_head_kv, n_ctx_train, tensor_count,
    architecture, name, has_chat_template, size_bytes = bytes of tensor data, hparams, eog_ids);
  * a GGUF reader of this script's own (every tensor's name, type, shape, offset, bytes; metadata
    key count), written from the GGUF specification, independent of the generator's writer;
  * the files' sizes and sha256: tools/fixtures/fixtures.sha256 and third_party/stories260K/README.md;
    for Hugging Face / MLX directories their safetensors headers and config.json read here with
    the standard library; their hyperparameters and vocabulary come from the oracle run on the F32
    GGUF twin written beside them with exactly the same numbers.

Regenerate (from the repository root, after `make fixtures`, with the oracle installed):
    /usr/bin/python3 tests/goldens/info/make_goldens.py --oracle ../shared/tools/llamacpp-oracle \
        --fixtures build/fixtures > tests/goldens/info/info.json
"""
import argparse
import hashlib
import json
import os
import re
import struct
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))

# Hugging Face / MLX directory -> its F32 GGUF twin (same weights, same tokenizer; see fixtures README).
HF_TWINS = {
    "hf/smollm2-tiny/hf-bf16": "hf/smollm2-tiny/oracle-f32.gguf",
    "hf/smollm2-tiny/mlx-4bit": "hf/smollm2-tiny/mlx-4bit-oracle-f32.gguf",
}


TYPE_NAMES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 10: "q2_K", 11: "q3_K",
              12: "q4_K", 13: "q5_K", 14: "q6_K", 30: "bf16"}
# bytes per block and values per block
TYPE_SIZE = {0: (4, 1), 1: (2, 1), 2: (18, 32), 3: (20, 32), 6: (22, 32), 7: (24, 32), 8: (34, 32), 10: (84, 256),
             11: (110, 256), 12: (144, 256), 13: (176, 256), 14: (210, 256), 30: (2, 1)}


class GgufFile:
    """GGUF v3: header, metadata (skipped value by value), tensor infos, aligned data section."""

    def __init__(self, path):
        self.b = open(path, "rb").read()
        self.o = 0
        magic, ver, nt, nkv = struct.unpack_from("<4sIQQ", self.b, 0)
        assert magic == b"GGUF" and ver == 3, path
        self.o = 24
        self.kv = {}
        for _ in range(nkv):
            k = self.str()
            (t,) = self.u("<I")
            self.kv[k] = self.val(t)
        align = self.kv.get("general.alignment", 32)
        self.tensors = []
        for _ in range(nt):
            name = self.str()
            (nd,) = self.u("<I")
            ne = list(struct.unpack_from("<%dQ" % nd, self.b, self.o))
            self.o += 8 * nd
            t, off = self.u("<IQ")
            n = 1
            for x in ne:
                n *= x
            bs, per = TYPE_SIZE[t]
            self.tensors.append({"name": name, "type": t, "ne": ne, "offset": off, "nbytes": n // per * bs})
        self.data_offset = self.o + (-self.o) % align

    def u(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.o)
        self.o += struct.calcsize(fmt)
        return v

    def str(self):
        (n,) = self.u("<Q")
        s = self.b[self.o:self.o + n].decode("utf-8")
        self.o += n
        return s

    def val(self, t):
        fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}
        if t in fmt:
            return self.u(fmt[t])[0]
        if t == 8:
            return self.str()
        if t == 9:
            et, n = self.u("<IQ")
            return [self.val(et) for _ in range(n)]
        raise ValueError("GGUF value type %d" % t)


def oracle_info(oracle, path):
    out = subprocess.run(["node", "oracle.mjs", "info", path], cwd=oracle,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def sha_table(fixtures):
    """rel path -> sha256: fixtures.sha256 (fixtures) and the third_party README (stories260K)."""
    rows = {}
    for line in open(os.path.join(ROOT, "tools/fixtures/fixtures.sha256"), encoding="utf-8"):
        if line.strip() and not line.startswith("#"):
            sha, rel = line.split()
            rows[os.path.join(fixtures, rel)] = sha
    text = open(os.path.join(ROOT, "third_party/stories260K/README.md"), encoding="utf-8").read()
    for m in re.finditer(r"^\| `([^`]+)` \| (\d+) \| `([0-9a-f]{64})` \|", text, re.M):
        rows[os.path.join(ROOT, "third_party/stories260K", m.group(1))] = m.group(3)
    return rows


def check_file(path, table):
    """Size of a model file whose sha256 is the committed one."""
    data = open(path, "rb").read()
    if table.get(path) != hashlib.sha256(data).hexdigest():
        sys.exit("make_goldens: %s is not the committed file (sha256)" % path)
    return len(data)


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


def gguf_golden(oracle, path, table):
    o = oracle_info(oracle, path)
    g = from_oracle(o)
    g["format"] = "gguf"
    g["name"] = o["name"]
    g["file_bytes"] = check_file(path, table)
    g["tensor_bytes"] = o["size_bytes"]
    g["tokenizer"]["pre"] = o.get("tokenizer_pre", "")
    r = GgufFile(path)
    counts = {}
    tensors = []
    for t in r.tensors:
        name = TYPE_NAMES[t["type"]]
        counts[name] = counts.get(name, 0) + 1
        tensors.append([t["name"], name, t["ne"], r.data_offset + t["offset"], t["nbytes"]])
    g["tensor_types"] = counts
    g["n_metadata"] = len(r.kv)
    g["tensors"] = tensors
    if len(tensors) != g["n_tensors"] or sum(t[4] for t in tensors) != g["tensor_bytes"]:
        sys.exit("make_goldens: our GGUF reader and llama.cpp disagree on " + path)
    return g


def safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def hf_golden(oracle, d, table, twin):
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
    o = oracle_info(oracle, twin)
    g = from_oracle(o)
    # llama 3's rope_freqs.weight is in the GGUF twin only (HF derives it from config.json's rope_scaling)
    derived = [t for t in GgufFile(twin).tensors if t["name"] == "rope_freqs.weight"]
    if g["n_params"] - sum(t["ne"][0] for t in derived) != n_params or g["n_tensors"] - len(derived) != n_tensors:
        sys.exit("make_goldens: %s and its twin %s disagree" % (d, twin))
    g["n_params"], g["n_tensors"] = n_params, n_tensors
    g["format"] = "safetensors"
    g["name"] = os.path.basename(d)  # a directory's name (it has no general.name)
    g["file_bytes"] = sum(check_file(os.path.join(d, f), table) for f in files)
    g["tensor_bytes"] = tensor_bytes
    g["tensor_types"] = counts
    return g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", default=os.environ.get("LLMINFER_LCPP_ORACLE") or
                    os.path.join(ROOT, "..", "shared", "tools", "llamacpp-oracle"))
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "build", "fixtures"))
    a = ap.parse_args()
    oracle, fixtures = os.path.abspath(a.oracle), os.path.abspath(a.fixtures)
    table = sha_table(fixtures)
    out = {}
    tp = os.path.join(ROOT, "third_party", "stories260K")
    for f in sorted(os.listdir(tp)):
        if f.endswith(".gguf"):
            out[f] = gguf_golden(oracle, os.path.join(tp, f), table)
    for root, dirs, fs in os.walk(fixtures):
        dirs.sort()
        for f in sorted(fs):
            if f.endswith(".gguf"):
                p = os.path.join(root, f)
                out[os.path.relpath(p, fixtures)] = gguf_golden(oracle, p, table)
        rel = os.path.relpath(root, fixtures)
        if "config.json" in fs and rel in HF_TWINS:
            # (the other hf/*/hf-bf16 directories are not described here: for them `llminfer info`
            # reports the tokenizer.json vocabulary (unpadded) and gemma's norms as converted F32)
            twin = HF_TWINS[rel]
            g = hf_golden(oracle, root, table, os.path.join(fixtures, twin))
            g["twin"] = twin
            out[rel] = g
    json.dump({"command": "/usr/bin/python3 tests/goldens/info/make_goldens.py --oracle ORACLE_DIR --fixtures build/fixtures",
               "llama_cpp_build": oracle_info(oracle, os.path.join(tp, "stories260K.gguf"))["llama_cpp_build"]["llama_cpp_release"],
               "models": out}, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
