#!/usr/bin/env node
// Chat-template goldens from the tokenizer oracle (../shared/tools/tokenizer-oracle), cross-checked
// between its two Jinja engines: @huggingface/jinja (the oracle's renderer) and Python Jinja2
// configured as transformers configures it (render_fixed.py). Where they disagree, transformers'
// engine (Jinja2) is the golden and the row says "js_differs". In Jinja2, strftime_now() is fixed
// at 2024-07-26 14:05:09 (@huggingface/jinja uses today's date: templates that print it differ).
//
//   node tools/chat-goldens/goldens.mjs --tokenizer T --chats CHATS.jsonl --out OUT.jsonl [--kw k=v]...
//        one row per chat and add_generation_prompt: {id, add_generation_prompt, [kwargs], text|error, ids, [js_differs]}
//   node tools/chat-goldens/goldens.mjs --tokenizer T --chats CHATS.jsonl --templates DIR --out OUT.jsonl
//        every DIR/*.jinja: {template, id, add_generation_prompt, text|error, [js_differs]}
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ORACLE = process.env.TOKENIZER_ORACLE || path.resolve(HERE, '../../../shared/tools/tokenizer-oracle');
const lib = await import(pathToFileURL(path.join(ORACLE, 'lib.mjs')).href);

function args(argv) {
  const o = { kw: [] };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '');
    if (k === 'kw') o.kw.push(argv[++i]);
    else o[k] = argv[++i];
  }
  return o;
}
const opts = args(process.argv.slice(2));
if (!opts.tokenizer || !opts.chats || !opts.out) {
  console.error('usage: goldens.mjs --tokenizer T --chats CHATS.jsonl --out OUT.jsonl [--templates DIR] [--kw k=v]...');
  process.exit(2);
}

const res = lib.resolveTokenizer(opts.tokenizer);
const extra = {};
for (const kv of opts.kw) {
  const eq = kv.indexOf('=');
  if (eq < 0) extra[kv] = true;
  else extra[kv.slice(0, eq)] = lib.parseLooseValue(kv.slice(eq + 1));
}
const chats = lib.readJsonl(opts.chats);
let templates = [{ name: null, file: opts.template }];
if (opts.templates) {
  templates = fs.readdirSync(opts.templates).filter((f) => f.endsWith('.jinja')).sort()
    .map((f) => ({ name: f, file: path.join(opts.templates, f) }));
}

const jobs = [];
for (const t of templates) {
  for (const conv of chats) {
    for (const addGen of [false, true]) {
      const ctx = lib.chatContext(res, {
        messages: conv.messages, tools: conv.tools, documents: conv.documents, addGenerationPrompt: addGen,
        extra: { ...(conv.kwargs || {}), ...extra },
      });
      const template = lib.getChatTemplate(res, { templateFile: t.file, tools: conv.tools });
      const row = {};
      if (t.name) row.template = t.name;
      row.id = conv.id;
      row.add_generation_prompt = addGen;
      if (Object.keys(extra).length) row.kwargs = extra;
      let js;
      try {
        js = { text: await lib.renderJinja(template, ctx) };
      } catch (e) {
        js = { error: String(e.message || e) };
      }
      jobs.push({ row, js, template, ctx });
    }
  }
}

const py = spawnSync('python3', [path.join(HERE, 'render_fixed.py')], {
  input: JSON.stringify(jobs.map((j) => ({ template: j.template, context: j.ctx }))),
  encoding: 'utf8',
  maxBuffer: 1 << 30,
  env: { ...process.env, TOKENIZER_ORACLE: ORACLE },
});
if (py.status !== 0) {
  console.error(`render_fixed.py failed: ${py.stderr}`);
  process.exit(1);
}
const pyres = JSON.parse(py.stdout);
const engine = opts.templates ? null : await lib.getEngine(res, 'rust');
let differ = 0;
const rows = [];
for (let k = 0; k < jobs.length; k++) {
  const { row, js } = jobs[k];
  const p = pyres[k];
  const same = p.error ? !!js.error : js.text === p.text;
  if (p.error) row.error = p.error;
  else row.text = p.text;
  if (!same) {
    row.js_differs = true;
    differ++;
  }
  if (engine && row.text !== undefined) row.ids = (await engine.encode(row.text, false)).ids;
  rows.push(row);
}
lib.writeJsonl(opts.out, rows);
console.error(`${opts.out}: ${rows.length} renders (${res.name}); @huggingface/jinja differs from Jinja2 on ${differ}`);
