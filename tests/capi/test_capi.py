#!/usr/bin/env python3
"""The C API from Python with ctypes alone (the standard library; no package to install).

    python3 tests/capi/test_capi.py build/libllminfer.so MODEL REFERENCE

MODEL is third_party/stories260K/stories260K.gguf and REFERENCE its llama2.c greedy output
(stories260K.llama2c-reference.txt). Checks: errors as codes and messages, tokenize/detokenize
round trip with llama2.c's prompt ids, greedy tokens as llama2.c's, a streaming callback (Python
function) that sees the text and can cancel, a session over two turns, and generations from four
Python threads at once (ctypes releases the GIL during the calls) equal to the same calls one after
another. Exit status 0 when every check passes.
"""
import ctypes as C
import sys
import threading

lib_path, model_path, ref_path = sys.argv[1:4]
lib = C.CDLL(lib_path)

checks = 0
failures = 0


def check(cond, what):
    global checks, failures
    checks += 1
    if not cond:
        failures += 1
        print("check failed:", what, file=sys.stderr)


class LoadOptions(C.Structure):
    _fields_ = [("threads", C.c_int), ("context", C.c_int), ("kv_f32", C.c_int), ("batch", C.c_int),
                ("archdef_dir", C.c_char_p), ("archdef_dir_len", C.c_size_t)]


PIECE_FN = C.CFUNCTYPE(C.c_int, C.POINTER(C.c_char), C.c_size_t, C.c_void_p)


class GenerateOptions(C.Structure):
    _fields_ = [("max_tokens", C.c_int), ("temperature", C.c_float), ("top_k", C.c_int), ("top_p", C.c_float),
                ("min_p", C.c_float), ("repeat_penalty", C.c_float), ("repeat_last_n", C.c_int),
                ("seed", C.c_uint64), ("stop", C.POINTER(C.c_char_p)), ("stop_lens", C.POINTER(C.c_size_t)),
                ("n_stop", C.c_size_t), ("parse_special", C.c_int), ("chat", C.c_int), ("system", C.c_char_p),
                ("system_len", C.c_size_t), ("on_piece", PIECE_FN), ("user_data", C.c_void_p)]


class Result(C.Structure):
    _fields_ = [("text", C.POINTER(C.c_char)), ("text_len", C.c_size_t), ("tokens", C.POINTER(C.c_int32)),
                ("n_tokens", C.c_size_t), ("stop", C.c_int), ("prompt_tokens", C.c_int),
                ("prompt_tokens_evaluated", C.c_int), ("prompt_tokens_reused", C.c_int), ("seed", C.c_uint64),
                ("prefill_ms", C.c_double), ("prefill_tps", C.c_double), ("decode_ms", C.c_double),
                ("decode_tps", C.c_double), ("ttft_ms", C.c_double), ("error_code", C.c_int),
                ("error_message", C.POINTER(C.c_char)), ("error_message_len", C.c_size_t)]


P = C.c_void_p
lib.llminfer_version.restype = C.c_char_p
lib.llminfer_errc_string.restype = C.c_char_p
lib.llminfer_errc_string.argtypes = [C.c_int]
lib.llminfer_stop_string.restype = C.c_char_p
lib.llminfer_stop_string.argtypes = [C.c_int]
lib.llminfer_error_code.argtypes = [P]
lib.llminfer_error_message.restype = C.c_char_p
lib.llminfer_error_message.argtypes = [P, C.POINTER(C.c_size_t)]
lib.llminfer_error_free.argtypes = [P]
lib.llminfer_load_options_init.argtypes = [C.POINTER(LoadOptions)]
lib.llminfer_generate_options_init.argtypes = [C.POINTER(GenerateOptions)]
lib.llminfer_model_load.argtypes = [C.c_char_p, C.c_size_t, C.POINTER(LoadOptions), C.POINTER(P), C.POINTER(P)]
lib.llminfer_model_free.argtypes = [P]
lib.llminfer_generate.argtypes = [P, C.c_char_p, C.c_size_t, C.POINTER(GenerateOptions), C.POINTER(C.POINTER(Result)),
                                  C.POINTER(P)]
lib.llminfer_generate_tokens.argtypes = [P, C.POINTER(C.c_int32), C.c_size_t, C.POINTER(GenerateOptions),
                                         C.POINTER(C.POINTER(Result)), C.POINTER(P)]
lib.llminfer_result_free.argtypes = [C.POINTER(Result)]
lib.llminfer_session_new.argtypes = [P, C.POINTER(P), C.POINTER(P)]
lib.llminfer_session_add.argtypes = [P, C.c_char_p, C.c_size_t, C.c_char_p, C.c_size_t, C.POINTER(P)]
lib.llminfer_session_reply.argtypes = [P, C.POINTER(GenerateOptions), C.POINTER(C.POINTER(Result)), C.POINTER(P)]
lib.llminfer_session_reset.argtypes = [P]
lib.llminfer_session_message_count.argtypes = [P]
lib.llminfer_session_message_count.restype = C.c_size_t
lib.llminfer_session_cached_tokens.argtypes = [P]
lib.llminfer_session_free.argtypes = [P]
lib.llminfer_tokenize.argtypes = [P, C.c_char_p, C.c_size_t, C.c_int, C.c_int, C.POINTER(C.POINTER(C.c_int32)),
                                  C.POINTER(C.c_size_t), C.POINTER(P)]
lib.llminfer_tokens_free.argtypes = [C.POINTER(C.c_int32)]
lib.llminfer_detokenize.argtypes = [P, C.POINTER(C.c_int32), C.c_size_t, C.POINTER(C.POINTER(C.c_char)),
                                    C.POINTER(C.c_size_t), C.POINTER(P)]
lib.llminfer_string_free.argtypes = [C.POINTER(C.c_char)]


class LlmError(Exception):
    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def raise_error(rc, err):
    msg = lib.llminfer_error_message(err, None).decode()
    code = lib.llminfer_error_code(err)
    lib.llminfer_error_free(err)
    check(code == rc, "the error's code is the return value")
    raise LlmError(rc, msg)


def load(path, threads=2):
    o = LoadOptions()
    lib.llminfer_load_options_init(C.byref(o))
    o.threads = threads
    m, err = P(), P()
    b = path.encode()
    rc = lib.llminfer_model_load(b, len(b), C.byref(o), C.byref(m), C.byref(err))
    if rc:
        raise_error(rc, err)
    return m


def options(**kw):
    o = GenerateOptions()
    lib.llminfer_generate_options_init(C.byref(o))
    for k, v in kw.items():
        setattr(o, k, v)
    return o


def take_result(rc, res, err):
    if rc:
        raise_error(rc, err)
    r = res.contents
    out = {"text": C.string_at(r.text, r.text_len).decode(), "tokens": [r.tokens[i] for i in range(r.n_tokens)],
           "stop": lib.llminfer_stop_string(r.stop).decode(), "prompt_tokens": r.prompt_tokens,
           "reused": r.prompt_tokens_reused}
    lib.llminfer_result_free(res)
    return out


def generate_ids(m, ids, o):
    arr = (C.c_int32 * len(ids))(*ids)
    res, err = C.POINTER(Result)(), P()
    return take_result(lib.llminfer_generate_tokens(m, arr, len(ids), C.byref(o), C.byref(res), C.byref(err)), res, err)


def generate_text(m, text, o):
    b = text.encode()
    res, err = C.POINTER(Result)(), P()
    return take_result(lib.llminfer_generate(m, b, len(b), C.byref(o), C.byref(res), C.byref(err)), res, err)


ref = None
with open(ref_path) as f:
    for line in f:
        if line.startswith("# TOKENS "):
            ref = [int(x) for x in line.split()[2:]]
check(ref is not None and len(ref) == 201, "reference tokens")

check(len(lib.llminfer_version()) > 0, "version")
try:
    load("/nonexistent/x.gguf")
    check(False, "loading a missing file fails")
except LlmError as e:
    check(e.code == 2 and "/nonexistent/x.gguf" in e.message, "missing file: io error naming it")
check(lib.llminfer_errc_string(11) == b"out of memory", "errc string")

m = load(model_path)

# tokenize / detokenize
text = "Once upon a time"
ids_p, n, err = C.POINTER(C.c_int32)(), C.c_size_t(), P()
rc = lib.llminfer_tokenize(m, text.encode(), len(text), 1, 0, C.byref(ids_p), C.byref(n), C.byref(err))
check(rc == 0, "tokenize")
ids = [ids_p[i] for i in range(n.value)]
lib.llminfer_tokens_free(ids_p)
check(ids == ref[:5], f"llama2.c's prompt ids {ref[:5]}, got {ids}")
arr = (C.c_int32 * 4)(*ids[1:])
tp, tl = C.POINTER(C.c_char)(), C.c_size_t()
rc = lib.llminfer_detokenize(m, arr, 4, C.byref(tp), C.byref(tl), C.byref(err))
check(rc == 0 and C.string_at(tp, tl.value).decode() == text, "detokenize gives the text back")
lib.llminfer_string_free(tp)

# greedy: llama2.c's tokens
g = generate_ids(m, ref[:5], options(max_tokens=196))
check(g["tokens"] == ref[5:], "greedy tokens as llama2.c")
check(g["stop"] == "max_tokens", "stop max_tokens")
print(f"greedy: {len(g['tokens'])} tokens as llama2.c: {g['text'][:60]!r}...")

# streaming through a Python callback; returning 0 cancels
pieces = []


@PIECE_FN
def collect(p, n, _):
    pieces.append(C.string_at(p, n).decode())
    return 1


s = generate_text(m, text, options(max_tokens=30, on_piece=collect))
check("".join(pieces) == s["text"] and len(pieces) > 1, "the pieces make the text")
check(s["tokens"] == ref[5:35], "streamed greedy = llama2.c")
count = [0]


@PIECE_FN
def cancel_at_2(p, n, _):
    count[0] += 1
    return 0 if count[0] >= 2 else 1


c = generate_text(m, text, options(max_tokens=30, on_piece=cancel_at_2))
check(c["stop"] == "cancelled" and count[0] == 2, "the callback cancels")

# bad options
try:
    generate_text(m, "x", options(top_p=0.0))
    check(False, "top_p 0 is refused")
except LlmError as e:
    check(e.code == 1 and "top_p" in e.message, "top_p refused, named")

# a session: the second turn reuses the cache
sess = P()
check(lib.llminfer_session_new(m, C.byref(sess), C.byref(err)) == 0, "session")
for turn, msg in enumerate([b"Tell me a story.", b"And then?"]):
    check(lib.llminfer_session_add(sess, b"user", 4, msg, len(msg), C.byref(err)) == 0, "add")
    res = C.POINTER(Result)()
    r = take_result(lib.llminfer_session_reply(sess, C.byref(options(max_tokens=10)), C.byref(res), C.byref(err)),
                    res, err)
    check(len(r["tokens"]) > 0, "reply")
    check((r["reused"] > 0) == (turn == 1), "the second turn reuses the cached prefix")
check(lib.llminfer_session_message_count(sess) == 4, "4 messages")
lib.llminfer_session_reset(sess)
check(lib.llminfer_session_message_count(sess) == 0 and lib.llminfer_session_cached_tokens(sess) == 0, "reset")
lib.llminfer_session_free(sess)

# four threads at once (they share decoding steps) == one after another
prompts = [ref[:2], ref[:3], [1, 261], [1, 338, 13]]
opts = [options(max_tokens=24, temperature=0.8, top_p=0.95, seed=10 + i) for i in range(4)]
serial = [generate_ids(m, prompts[i], opts[i])["tokens"] for i in range(4)]
parallel = [None] * 4


def worker(i):
    parallel[i] = generate_ids(m, prompts[i], opts[i])["tokens"]


threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(parallel == serial and serial[0] != serial[1], "4 threads give the tokens of one after another")

lib.llminfer_model_free(m)
print(f"{checks} checks, {failures} failed")
sys.exit(1 if failures else 0)
