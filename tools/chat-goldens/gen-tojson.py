#!/usr/bin/env python3
"""Random values through tojson (indent, sort_keys, separators, ensure_ascii) and printing, for
tools/chat-goldens/crosscheck: gen-tojson.py SEED N > jobs.json"""
import json, random, sys
R = random.Random(int(sys.argv[1])); N = int(sys.argv[2])
CH = ["a", "é", "日本", "😀", "\n", "\t", "\"", "\\", "/", "<", ">", "&", "'", "\u2028", "\u0085", "\x00", "\x1f", "\x7f", " ", "\u200b", "\ufeff", "ß"]
def val(d):
    c = R.randrange(10 if d < 3 else 6)
    if c == 0: return R.choice([0, 1, -1, 123456789012345678, 2**53 + 1, -2**63])
    if c == 1: return R.choice([1.5, -0.0, 0.1, 1e20, 1e-7, 1e16, 123456.789, 2.0, 1e300, 5e-324, 0.30000000000000004, 1e15, 12345678.9])
    if c == 2: return R.choice([True, False, None])
    if c in (3, 4, 5): return "".join(R.choice(CH) for _ in range(R.randrange(5)))
    if c in (6, 7): return [val(d + 1) for _ in range(R.randrange(4))]
    return {"".join(R.choice(CH) for _ in range(R.randrange(1, 3))) + str(i): val(d + 1) for i in range(R.randrange(4))}
FMT = ["{{ v | tojson }}", "{{ v | tojson(indent=2) }}", "{{ v | tojson(indent=4, sort_keys=true) }}", "{{ v | tojson(separators=(',', ':')) }}",
       "{{ v | tojson(ensure_ascii=true) }}", "{{ v | tojson(indent='\\t') }}", "{{ v | tojson(indent=0) }}", "{{ v }}", "{{ v | string }}", "{{ v | pprint }}"]
jobs = []
for _ in range(N):
    jobs.append({"template": R.choice(FMT), "context": {"v": val(0)}})
json.dump(jobs, sys.stdout, ensure_ascii=False)
