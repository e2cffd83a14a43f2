// The official openai npm client (version pinned by package-lock.json) against llminfer serve:
// models, chat (plain and streaming, the same text for the same seed), completions, a stop string,
// usage counts, and errors as the client's typed exceptions (400, 401).
//   node test.mjs BASE_URL [KEYED_BASE_URL KEY]      (e.g. http://127.0.0.1:8080/v1)
import OpenAI from "openai";

const [base, keyedBase, key] = process.argv.slice(2);
let checks = 0, failures = 0;
function check(cond, what) {
  checks++;
  if (!cond) { failures++; console.error("check failed:", what); }
}

const client = new OpenAI({ baseURL: base, apiKey: "unused", maxRetries: 0, timeout: 60000 });

const models = await client.models.list();
const modelId = models.data[0]?.id;
check(models.data.length === 1 && typeof modelId === "string", "models.list gives the model");

const req = { model: modelId, messages: [{ role: "user", content: "Tell me about the sea." }], max_tokens: 10,
              temperature: 0.7, seed: 42 };
const plain = await client.chat.completions.create(req);
const text = plain.choices[0].message.content;
check(typeof text === "string" && text.length > 0, "chat: some text");
check(plain.choices[0].finish_reason === "length", "chat: finish_reason length at max_tokens");
check(plain.object === "chat.completion" && plain.choices[0].message.role === "assistant", "chat: object shape");
check(plain.usage.completion_tokens === 10 && plain.usage.prompt_tokens > 0 &&
      plain.usage.total_tokens === plain.usage.prompt_tokens + 10, "chat: usage counts");

const again = await client.chat.completions.create(req);
check(again.choices[0].message.content === text, "chat: the same seed gives the same text");
check(again.usage.prompt_tokens_details?.cached_tokens > 0, "chat: the repeated prompt reuses a slot's cache");

let streamed = "", finish = null, chunks = 0;
const stream = await client.chat.completions.create({ ...req, stream: true });
for await (const chunk of stream) {
  chunks++;
  for (const c of chunk.choices) {
    streamed += c.delta?.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
}
check(streamed === text, `stream: the same text as the plain call (${JSON.stringify(streamed)} vs ${JSON.stringify(text)})`);
check(finish === "length" && chunks >= 3, "stream: chunks and a finish_reason");

// a stop string taken from the text: the reply ends before it, finish_reason "stop"
const words = text.split(" ").filter((w) => w.length > 1);
if (words.length > 1) {
  const stop = words[1];
  const cut = await client.chat.completions.create({ ...req, stop: [stop] });
  check(cut.choices[0].finish_reason === "stop", "stop: finish_reason stop");
  check(!cut.choices[0].message.content.includes(stop) && text.startsWith(cut.choices[0].message.content),
        "stop: the text ends before the stop string");
}

const comp = await client.completions.create({ model: modelId, prompt: "Once upon a time", max_tokens: 6, seed: 1 });
check(comp.object === "text_completion" && typeof comp.choices[0].text === "string" &&
      comp.usage.completion_tokens === 6, "completions: text and usage");

async function expectError(fn, status, cls, needle, what) {
  try {
    await fn();
    check(false, `${what}: no error`);
  } catch (e) {
    check(e instanceof cls && e.status === status, `${what}: ${cls.name} ${status} (got ${e?.constructor?.name} ${e?.status})`);
    check(!needle || String(e.message).includes(needle), `${what}: the message names ${needle} (${e.message})`);
  }
}
await expectError(() => client.chat.completions.create({ ...req, temperature: 5 }), 400, OpenAI.BadRequestError,
                  "temperature", "temperature out of range");
await expectError(() => client.chat.completions.create({ ...req, messages: "hi" }), 400, OpenAI.BadRequestError,
                  "messages", "messages of the wrong type");
await expectError(() => client.chat.completions.create({ ...req, presence_penalty: 0.5 }), 400, OpenAI.BadRequestError,
                  "presence_penalty", "an unsupported penalty is refused by name");

if (keyedBase) {
  const wrong = new OpenAI({ baseURL: keyedBase, apiKey: "wrong-key", maxRetries: 0 });
  await expectError(() => wrong.models.list(), 401, OpenAI.AuthenticationError, "", "wrong API key");
  const right = new OpenAI({ baseURL: keyedBase, apiKey: key, maxRetries: 0 });
  const ok = await right.chat.completions.create({ ...req, max_tokens: 3 });
  check(ok.choices[0].message.content.length > 0, "the right API key works");
}

console.log(`openai client: ${checks} checks, ${failures} failed`);
process.exit(failures ? 1 : 0);
