#!/usr/bin/env python3
"""Writes the seeds of fuzz_cli (tests/fuzz/corpus/cli/): one or more per command, and the hostile
shapes of issue 16 as the command line meets them. Run from the repository root; commit the result.

  tests/fuzz/cli_seeds.py

A seed is ARGS \\0 F \\0@G\\0 G: ARGS one argument per line (the first is the command), F and G two files
(@F, also standard input; @G, also @D/llama.archdef). @M is the committed stories260K model, @O an
output file (see tests/fuzz/fuzz_cli.cpp).
"""
import os
import struct
import sys

OUT = "tests/fuzz/corpus/cli"


def seed(name, args, f=b"", g=b""):
    data = "\n".join(args).encode() + b"\0" + f + (b"\0@G\0" + g if g else b"")
    assert len(data) <= 32768, name
    with open(os.path.join(OUT, name), "wb") as fh:
        fh.write(data)


def read(path):
    with open(path, "rb") as fh:
        return fh.read()


LLAMA = read("tests/fuzz/corpus/archdef/llama.archdef")


def gguf(kv, tensors):
    """A GGUF v3 file: kv {key: str | int (uint32)}, tensors [(name, dims, float32 values)]."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, v in kv.items():
        out += s(k) + (struct.pack("<I", 8) + s(v) if isinstance(v, str) else struct.pack("<II", 4, v))
    offset = 0
    for name, dims, values in tensors:
        out += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", 0, offset)
        offset += (len(values) * 4 + 31) // 32 * 32
    out += b"\0" * (-len(out) % 32)
    for _, _, values in tensors:
        data = struct.pack("<%df" % len(values), *values)
        out += data + b"\0" * (-len(data) % 32)
    return out


def with_block_steps(n):
    """The built-in llama definition with n tensor-free steps more per layer."""
    i = LLAMA.index(b"\nblock\n") + len(b"\nblock\n")
    return LLAMA[:i] + b"  scale(x, 1.0)\n" * n + LLAMA[i:]


def main():
    os.makedirs(OUT, exist_ok=True)
    msgs = b'[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi \xe2\x9c\x93"}]'
    # every command, in its usual shape
    seed("help", ["--help"])
    seed("version", ["--version"])
    seed("unknown-command", ["frobnicate", "-m", "@M"])
    seed("info", ["info", "@M"])
    seed("info-json-all", ["info", "@M", "--json", "--all"])
    seed("info-gguf-file", ["info", "@F", "--json"], read("tests/fuzz/corpus/gguf/base-v3.gguf"))
    seed("status", ["status", "--json"])
    seed("status-dump", ["status", "--dump", "llama", "--archdef", "@D"], g=LLAMA)
    seed("tokenize-text", ["tokenize", "-m", "@M", "--text", "Once upon a time", "--json"])
    seed("tokenize-file", ["tokenize", "-m", "@M", "--file", "@F", "--special", "--no-bos"], "Lily <s> saw a \xe2\x9c\x93 dog\n".encode())
    seed("tokenize-stdin", ["tokenize", "-m", "@M", "--file", "-"], b"a cat")
    seed("tokenize-jsonl", ["tokenize", "-m", "@M", "--jsonl", "@F"],
         b'{"id":1,"text":"Hello"}\n{"id":[2],"text":"world"}\n\n{"id":"x","text":""}\r\n')
    seed("detokenize", ["detokenize", "-m", "@M", "--ids", "1,403,407,261,378", "--json"])
    seed("detokenize-skip", ["detokenize", "-m", "@M", "--ids", "[1, 2, 3]", "--skip-special"])
    seed("template", ["template", "-m", "@M", "--messages", "@F", "--add-generation-prompt", "--json"], msgs)
    seed("template-vars", ["template", "-m", "@M", "--messages", "@F", "--var", "enable_thinking=false", "--var",
                           "tools=[]", "--var", "flag"],
         b'{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],'
         b'"documents":[{"title":"t","text":"d"}],"kwargs":{"k":1}}')
    seed("template-file", ["template", "--template", "@G", "--messages", "@F", "--var", "bos_token=<s>"], msgs,
         b"{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
         b"{% if add_generation_prompt %}[assistant]{% endif %}")
    seed("logits", ["logits", "-m", "@M", "--ids", "1,403,407", "--all", "--out", "@O", "--json"])
    seed("compare", ["compare", "-m", "@M", "--ids", "1,403", "--reference", "@F", "--json"],
         struct.pack("<512f", *([0.5] * 512)))
    seed("compare-generated", ["compare", "-m", "@M", "--ids", "1,403", "--generated", "407,261", "--reference", "@F"],
         struct.pack("<1024f", *([0.25] * 1024)))
    seed("run-prompt", ["run", "-m", "@M", "-p", "Once upon a time", "-n", "4", "--temp", "0"])
    seed("run-json-sampling", ["run", "-m", "@M", "--ids", "1,403", "-n", "4", "--json", "--temp", "0.8", "--top-k",
                               "5", "--top-p", "0.9", "--min-p", "0.1", "--repeat-penalty", "1.1", "--repeat-last-n",
                               "-1", "--seed", "42", "--stop", "the", "--kv-type", "f32"])
    seed("run-file-chat", ["run", "-m", "@M", "-f", "@F", "--chat", "--system", "Be brief.", "--echo", "--special",
                           "-n", "2"], b"Tell me <|im_start|> a story")
    seed("run-archdef", ["run", "-m", "@M", "--ids", "1", "-n", "2", "--archdef", "@D", "--no-mmap"], g=LLAMA)
    seed("chat", ["chat", "-m", "@M", "--system", "Be brief.", "--stats", "-n", "3", "--seed", "1"],
         b"Hello\nmore \\\nlines\n/reset\n/unknown\nbye\n/exit\n")
    seed("chat-save", ["chat", "-m", "@M", "--save", "@O", "-n", "2", "--kv-type", "f32"], b"Hi\n")
    seed("chat-load", ["chat", "-m", "@M", "--load", "@F", "-n", "2"], read("tests/fuzz/corpus/session/one-turn.sess")
         if os.path.exists("tests/fuzz/corpus/session/one-turn.sess") else b"LLMS")
    # structured output (run and chat on main since the grammar merge: --grammar FILE, --json-schema FILE,
    # --logit-bias ID=BIAS, --ban IDS)
    seed("run-grammar", ["run", "-m", "@M", "-p", "Once", "-n", "8", "--grammar", "@G", "--ban", "2"],
         g=b'root ::= ("yes" | "no") [a-z ]* "."\n')
    seed("run-grammar-bad", ["run", "-m", "@M", "-p", "Once", "--grammar", "@G"], g=b'root ::= ( "a" \n')
    seed("run-json-schema", ["run", "-m", "@M", "-p", "Once", "-n", "8", "--json-schema", "@F", "--logit-bias",
                             "13=-inf", "--json"],
         b'{"type":"object","properties":{"a":{"type":"integer"},"b":{"enum":["x",1,null]}},"required":["a"]}')
    seed("chat-json-schema", ["chat", "-m", "@M", "--json-schema", "@G", "-n", "4"], b"hi\n",
         b'{"type":"array","items":{"type":"string","maxLength":3},"maxItems":3}')
    # the load limits
    seed("limit-session", ["run", "-m", "@M", "--ids", "1", "-c", "256", "--max-session-mb", "1"])
    seed("limit-steps", ["run", "-m", "@M", "--ids", "1", "--max-program-steps", "50"])
    seed("limit-bad", ["logits", "-m", "@M", "--ids", "1", "--out", "@O", "--max-session-mb=-1",
                       "--max-program-steps", "99999999999999999999"])
    # issue 16's shapes
    seed("issue16-steps-definition", ["run", "-m", "@M", "--ids", "1", "-n", "1", "--archdef", "@D",
                                      "--max-program-steps", "5000"], g=with_block_steps(1500))
    # a tensor-free attention in each of 4096 layers: 32 GiB of KV cache for the file's context
    kvhog = gguf({"general.architecture": "kvhog", "kvhog.block_count": 4096, "kvhog.embedding_length": 512,
                  "kvhog.context_length": 4096, "kvhog.attention.head_count": 8, "kvhog.attention.head_count_kv": 8},
                 [("token_embd.weight", [512, 4], [0.01] * 2048)])
    seed("issue16-kv-definition", ["chat", "-m", "@F", "--archdef", "@D"], kvhog,
         read("tests/fuzz/corpus/archdef/tensor_free_attention.archdef"))
    seed("issue16-kv-definition-small", ["run", "-m", "@F", "--archdef", "@D", "--ids", "1,2", "-c", "16",
                                         "--max-session-mb", "1"], kvhog,
         read("tests/fuzz/corpus/archdef/tensor_free_attention.archdef"))
    seed("issue16-elif-chain", ["template", "--template", "@G", "--messages", "@F"], msgs,
         read("tests/fuzz/corpus/jinja/issue16-elif-chain.jinja"))
    seed("issue16-long-string-scan", ["template", "--template", "@G", "--messages", "@F"], msgs,
         read("tests/fuzz/corpus/jinja/issue16-long-string-scan.jinja"))
    seed("issue16-long-string-steps", ["template", "--template", "@G", "--messages", "@F"], msgs,
         b"{% set s = 'a' * 60000 %}{% for i in range(90000) %}{% if s is lower %}{% endif %}{% endfor %}")
    seed("issue16-recursion", ["template", "--template", "@G", "--messages", "@F"], msgs,
         read("tests/fuzz/corpus/jinja/issue16-recursion.jinja"))
    seed("issue16-input-too-long", ["tokenize", "-m", "@M", "--file", "@F"], b"z" * 17000)
    seed("issue16-stdin-too-long", ["chat", "-m", "@M"], b"y" * 17000 + b"\n")
    seed("issue16-prompt-longer-than-context", ["run", "-m", "@M", "-c", "8", "-p", "one two three four five six"])
    seed("issue16-combining-marks", ["tokenize", "-m", "@M", "--file", "@F"], "a\u0301\u0316\u0300".encode() * 2000)
    seed("issue16-info-escapes", ["info", "@F"], read("tests/fuzz/corpus/gguf/base-v2.gguf").replace(
        b"corpus", b"\x1b[2J\x07\x9b", 1))
    seed("issue16-compare-nan", ["compare", "-m", "@M", "--ids", "1", "--reference", "@F"],
         struct.pack("<512f", *([float("nan")] * 512)))
    seed("issue16-block-count-65536", ["run", "-m", "@F", "--ids", "1", "-n", "1", "--archdef", "@D"],
         read("tests/fuzz/corpus/gguf/block-count-65536.gguf"),
         b"arch hostile\nkind decoder\nprologue\n  x = embed(token_embd.weight)\nblock\n" + b"  silu(x)\n" * 300 +
         b"epilogue\n  logits = matmul(x, token_embd.weight)\n")
    seed("issue16-definition-not-a-file", ["run", "-m", "@M", "--ids", "1", "--archdef", "@F"])
    # usage errors
    seed("usage-errors", ["run", "-m", "@M", "-p", "a", "--ids", "1", "-t", "-3", "--temp", "nan", "--bogus"])
    seed("usage-inline", ["run", "--model=@M", "--ids=1,2", "--max-tokens=2", "--context=16", "--threads=2",
                          "--no-mmap=1"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
