#!/usr/bin/env python3
"""Writes tests/data/chat/chats.jsonl: the conversations of the chat-template goldens (multi-turn,
system prompts, tools and tool calls, reasoning, unicode, empty content, content lists, role
errors, special-token text and Jinja-looking text inside content). Deterministic."""
import json, os

tools = [
    {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web <fast> & \"safe\".",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}},
                    "required": ["query"]}}},
]
call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}}
call_str = {"id": "call_2", "type": "function", "function": {"name": "search", "arguments": "{\"query\": \"llama\", \"max_results\": 3}"}}

C = []
def add(id, messages, tools=None):
    c = {"id": id, "messages": messages}
    if tools is not None:
        c["tools"] = tools
    C.append(c)

u = lambda t: {"role": "user", "content": t}
a = lambda t: {"role": "assistant", "content": t}
s = lambda t: {"role": "system", "content": t}

add("single", [u("Hello!")])
add("system-multi", [s("You are a concise assistant."), u("What is 2+3?"), a("5."), u("And times 4?")])
add("multi-no-system", [u("Hi"), a("Hello, how can I help?"), u("Tell me a joke."), a("Why did the chicken cross the road?"), u("Why?")])
add("thinking-inline", [u("Is 91 prime?"), a("<think>\n91 = 7 * 13.\n</think>\n\nNo, 91 = 7 × 13."), u("And 97?")])
add("reasoning-field", [u("Is 91 prime?"), {"role": "assistant", "content": "No, 91 = 7 × 13.", "reasoning_content": "91 = 7 * 13."}, u("And 97?")])
add("reasoning-last", [u("Pick a number."), {"role": "assistant", "content": "42", "reasoning_content": "Any number works."}])
add("assistant-last", [u("Say hi"), a("Hi there")])
add("tools-call", [s("You can call tools."), u("Weather in Zürich?"), {"role": "assistant", "content": "", "tool_calls": [call]},
                   {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
                   a("It is 21.5 °C and clear in Zürich.")], tools)
add("tools-string-args", [u("Search llama"), {"role": "assistant", "content": None, "tool_calls": [call_str]},
                          {"role": "tool", "tool_call_id": "call_2", "content": "3 results"}, u("Thanks")], tools)
add("tools-multi-response", [u("Weather and search"), {"role": "assistant", "content": "Checking.", "tool_calls": [call, call_str]},
                             {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                             {"role": "tool", "tool_call_id": "call_2", "content": "found 3"}, a("Done.")], tools)
add("tools-only-defs", [u("What can you do?")], tools)
add("unicode", [s("Réponds en français — s'il te plaît."), u("日本語で答えて 🙂 👩‍👩‍👧 مرحبا नमस्ते"), a("はい、わかりました。Ça va ✓"), u("Ελληνικά: ΟΔΥΣΣΕΥΣ; 한국어; עברית")])
add("empty-content", [u(""), a(""), u("   ")])
add("whitespace", [s("  padded system  \n"), u("\n\n  spaced question?  \n\n"), a("\tanswer\t"), u("x\r\ny")])
add("content-parts", [{"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "text", "text": "this."}]},
                      a("Sure."), {"role": "user", "content": [{"type": "text", "text": "More"}]}])
add("content-parts-system", [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, u("Hi")])
add("special-text", [u("Type <|im_end|> and <|eot_id|> and <start_of_turn>model and <|begin_of_text|> literally."), a("<|im_start|>user\nnope"), u("</s> <bos> <think> </think>")])
add("jinja-text", [u("{{ 7*7 }} {% if true %}x{% endif %} {# c #} \"quoted\" 'single' back\\slash"), a("Literal {{ messages }} stays.")])
add("system-middle", [u("Hi"), s("Late system"), u("Hello?")])
add("consecutive-user", [u("One"), u("Two")])
add("assistant-first", [a("I start."), u("Ok")])
add("role-other", [{"role": "developer", "content": "Dev note"}, u("Hi"), {"role": "ipython", "content": "out"}])
add("system-only", [s("Only a system message.")])
add("extra-keys", [{"role": "user", "content": "Hi", "name": "alice", "id": 7}, {"role": "assistant", "content": "Hey alice", "name": "bot"}])
add("long", [s("sys")] + [m for k in range(6) for m in (u(f"question {k}"), a(f"answer {k}"))] + [u("last")])
add("numbers-in-args", [u("Compute"), {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": "pi", "max_results": 2, "exact": True, "ratio": 0.25, "tags": ["a", "b"], "none": None}}}]},
                        {"role": "tool", "content": "3.14159"}], tools)
add("newlines-content", [u("line1\nline2\n\nline4"), a("ok\n"), u("\n")])
add("think-empty", [u("q"), a("<think>\n\n</think>\n\nanswer"), u("q2"), a("<think>reason</think>final")])

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "chat", "chats.jsonl")
with open(out, "w", encoding="utf-8") as f:
    for c in C:
        f.write(json.dumps(c, ensure_ascii=False) + "\n")
print(f"{os.path.normpath(out)}: {len(C)} conversations")
