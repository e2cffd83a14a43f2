#!/usr/bin/env bash
# Regenerates the chat-template goldens in tests/data/chat/ with the tokenizer oracle
# (../shared/tools/tokenizer-oracle, Node) cross-checked against Python Jinja2 (python3-jinja2).
#   tools/chat-goldens/make-goldens.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
D=tests/data/chat
G=tools/chat-goldens/goldens.mjs
ORACLE=${TOKENIZER_ORACLE:-../shared/tools/tokenizer-oracle}
tools/chat-goldens/make-chats.py
python3 tools/chat-goldens/make-snippets.py
# the llama3_1 template (the test cannot use the oracle's 9 MB tokenizer.json)
(cd "$ORACLE" && node tok.mjs export --tokenizer llama3_1 --out /tmp/llminfer-llama3_1-export >/dev/null)
cp /tmp/llminfer-llama3_1-export/chat_template.jinja $D/llama3_1.jinja
for v in qwen3 llama3 llama3_1 gemma3 smollm2; do
  node $G --tokenizer $v --chats $D/chats.jsonl --out $D/expected-chat-$v.jsonl
done
node $G --tokenizer qwen3 --kw enable_thinking=false --chats $D/chats.jsonl --out $D/expected-chat-qwen3-nothink.jsonl
node $G --tokenizer qwen3 --kw enable_thinking=true --chats $D/chats.jsonl --out $D/expected-chat-qwen3-think.jsonl
# llama.cpp's collection of real templates (copied into $D/templates from the llama.cpp checkout)
node $G --tokenizer llama3_1 --chats $D/template-chats.jsonl --templates $D/templates --out $D/expected-templates.jsonl
