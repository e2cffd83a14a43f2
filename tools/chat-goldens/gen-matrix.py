#!/usr/bin/env python3
"""Every llama.cpp template x many conversations x add_generation_prompt, contexts as transformers builds them (tools/chat-goldens/crosscheck)."""
import json, os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "tests", "data", "chat")
D = os.path.join(DATA, "templates")
chats = [json.loads(l) for l in open(os.path.join(DATA, "chats.jsonl"), encoding="utf-8")] + [json.loads(l) for l in open(os.path.join(DATA, "template-chats.jsonl"), encoding="utf-8")]
extra = [
  {"id": "empty", "messages": []},
  {"id": "only-system", "messages": [{"role": "system", "content": "S"}]},
  {"id": "last-assistant", "messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "partial"}]},
  {"id": "str-args", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}, {"role": "tool", "content": "r", "tool_call_id": "c1"}, {"role": "tool", "content": "r2", "tool_call_id": "c2"}]},
  {"id": "ws", "messages": [{"role": "system", "content": "  sys  \n"}, {"role": "user", "content": "\n\n hi \t"}, {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nanswer  "}, {"role": "user", "content": ""}]},
  {"id": "think-kw", "kwargs": {"enable_thinking": False}, "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "reasoning_content": "r"}, {"role": "user", "content": "c"}]},
  {"id": "parts", "messages": [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image"}, {"type": "text", "text": " here"}]}]},
  {"id": "unicode", "messages": [{"role": "system", "content": "Ÿ ǅ ß ﬁ"}, {"role": "user", "content": "日本語 😀 \u2028 é"}]},
  {"id": "multi-tool", "tools": [{"type": "function", "function": {"name": "a", "description": "A", "parameters": {"type": "object", "properties": {"x": {"type": "integer", "enum": [1, 2]}, "y": {"type": "array", "items": {"type": "string"}}}, "required": ["x"]}}}, {"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {}}}}], "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "a", "arguments": {"x": 1, "y": ["é", "<b>"]}}}, {"id": "2", "type": "function", "function": {"name": "b", "arguments": {}}}]}, {"role": "tool", "content": "{\"ok\": true}", "tool_call_id": "1"}, {"role": "tool", "content": "done", "tool_call_id": "2"}]},
]
jobs = []
for name in sorted(os.listdir(D)):
    t = open(os.path.join(D, name), encoding="utf-8").read()
    for c in chats + extra:
        for agp in (False, True):
            ctx = {"messages": c["messages"], "add_generation_prompt": agp, "bos_token": "<s>", "eos_token": "</s>"}
            if c.get("tools"): ctx["tools"] = c["tools"]
            ctx.update(c.get("kwargs", {}))
            jobs.append({"template": t, "context": ctx, "name": name, "id": c["id"]})
json.dump(jobs, sys.stdout, ensure_ascii=False)
