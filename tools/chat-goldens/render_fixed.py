#!/usr/bin/env python3
"""Python Jinja2 configured as transformers configures it (the oracle's render_py.py), with a fixed
clock for strftime_now() (2024-07-26 14:05:09, a Friday) so goldens do not depend on the day.

stdin:  JSON list of {"template": str, "context": {...}}
stdout: JSON list of {"text": str} or {"error": str}"""
import json
import os
import sys
from datetime import datetime

ORACLE = os.environ.get("TOKENIZER_ORACLE", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "..", "..", "..", "shared", "tools", "tokenizer-oracle"))
sys.path.insert(0, ORACLE)
import render_py  # noqa: E402

FIXED = datetime(2024, 7, 26, 14, 5, 9)


def main():
    jobs = json.load(sys.stdin)
    env = render_py.make_env()
    env.globals["strftime_now"] = lambda fmt: FIXED.strftime(fmt)
    cache = {}
    out = []
    for job in jobs:
        try:
            t = cache.get(job["template"])
            if t is None:
                t = cache[job["template"]] = env.from_string(job["template"])
            out.append({"text": t.render(**job["context"])})
        except Exception as e:  # report, keep going
            out.append({"error": f"{type(e).__name__}: {e}"})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
