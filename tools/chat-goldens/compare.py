#!/usr/bin/env python3
"""compare.py JOBS PY.json OURS.json [N]: the renders that differ (text, or error vs text), first N shown.
Our deliberate refusals ("unsupported construct") are counted apart, not as differences. Exit 1 on a difference."""
import json, sys
jobs, py, ours = (json.load(open(p, encoding="utf-8")) for p in sys.argv[1:4])
show = int(sys.argv[4]) if len(sys.argv) > 4 else 20
bad = refused = 0
for j, x, y in zip(jobs, py, ours):
    if "unsupported construct" in y.get("error", ""):
        refused += 1
        continue
    if ("error" in x and "error" in y) or ("text" in x and x.get("text") == y.get("text")):
        continue
    bad += 1
    if bad <= show:
        print("template:", repr(j["template"])[:600], j.get("name", ""), j.get("id", ""))
        print("  jinja2: ", repr(x)[:400])
        print("  ours:   ", repr(y)[:400])
print(f"{sys.argv[1]}: {len(jobs)} renders, {bad} differ, {refused} refused as unsupported, "
      f"{sum('error' in x for x in py)} errors in Jinja2")
sys.exit(1 if bad else 0)
