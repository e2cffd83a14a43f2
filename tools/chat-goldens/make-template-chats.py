#!/usr/bin/env python3
"""Writes tests/data/chat/template-chats.jsonl: the few conversations every template of llama.cpp's
collection (tests/data/chat/templates) is rendered with."""
import json, os
tools = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather of a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}},
                         "required": ["city"]}}}]
C = [
    {"id": "basic", "messages": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi there"},
                                 {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Name a color."}]},
    {"id": "no-system", "messages": [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"},
                                     {"role": "user", "content": "Bye ✓ 日本"}]},
    {"id": "tools", "tools": tools, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                                                             "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny in Paris."}]},
    {"id": "reasoning", "messages": [{"role": "user", "content": "2+2?"},
                                     {"role": "assistant", "content": "4", "reasoning_content": "Add them."},
                                     {"role": "user", "content": "3+3?"}]},
]
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "chat", "template-chats.jsonl")
with open(out, "w", encoding="utf-8") as f:
    for c in C:
        f.write(json.dumps(c, ensure_ascii=False) + "\n")
print(f"{os.path.normpath(out)}: {len(C)} conversations")
