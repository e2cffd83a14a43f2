#!/usr/bin/env python3
"""Writes tests/tokenizer/overlay-<name>.json: a real tokenizer.json (exported by the Hugging Face oracle)
without its large parts, so that the tests can rebuild the full file from the GGUF vocabulary of the
matching model in ../shared/models and exercise the tokenizer.json code path.

    tools/tokenizer_overlays.py        # runs `node tok.mjs export` for qwen3, llama3, llama3_1

Removed: model.vocab and model.merges (the test takes them from the GGUF: same tokens, same order), and
for the Llama 3 files added_tokens (the test derives them from the GGUF: ids >= 128000, all special).
Kept: normalizer, pre_tokenizer, post_processor, decoder, the model's flags, and the bos/eos entries of
tokenizer_config.json under "__tokenizer_config".
"""
import json
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
ORACLE = os.environ.get("ORACLE", os.path.join(ROOT, "..", "shared", "tools", "tokenizer-oracle"))

for name in ("qwen3", "llama3", "llama3_1"):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["node", "tok.mjs", "export", "--tokenizer", name, "--out", tmp], cwd=ORACLE, check=True,
                       capture_output=True)
        tj = json.load(open(os.path.join(tmp, "tokenizer.json"), encoding="utf-8"))
        tc = json.load(open(os.path.join(tmp, "tokenizer_config.json"), encoding="utf-8"))
    tj["model"]["vocab"] = {}
    tj["model"]["merges"] = []
    if name.startswith("llama3"):
        tj["added_tokens"] = []
        tj["__added_tokens_from_gguf"] = True
    tj["__tokenizer_config"] = {k: tc[k] for k in ("bos_token", "eos_token") if k in tc}
    out = os.path.join(ROOT, "tests", "tokenizer", "overlay-%s.json" % name)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(out, os.path.getsize(out))
