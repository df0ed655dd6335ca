// Drives `specd serve` with the official OpenAI Node client: models, chat and text completions,
// streaming and not, stop sequences, seeds, logprobs, usage, errors, and 16 concurrent greedy
// requests that must equal the same requests sent one at a time. Prints the greedy texts as JSON
// on the last line (the shell wrapper compares servers with and without speculation).
'use strict';
const path = require('path');
const assert = require('assert');
const { OpenAI } = require(path.join(process.env.OPENAI_MODULES, 'openai'));

const baseURL = process.env.SPECD_URL;  // http://127.0.0.1:PORT/v1 (loopback only)
const apiKey = process.env.SPECD_KEY;
const model = process.env.SPECD_MODEL;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

const PROMPTS = [
  'def fibonacci(n):\n', 'import os\n\ndef list_files(path):\n', 'class Stack:\n    def __init__(self):\n',
  'def is_prime(n):\n', '# Read a CSV file\nimport csv\n', 'def merge_sort(items):\n',
  'def parse_args():\n    parser = ', 'from collections import defaultdict\n\n',
  'def read_json(path):\n', 'async def fetch(url):\n', 'def binary_search(a, x):\n',
  'class Point:\n', 'def flatten(nested):\n', 'with open("data.txt") as f:\n',
  'def gcd(a, b):\n', 'try:\n    import numpy as np\n',
];

async function complete(prompt, extra = {}) {
  const r = await client.completions.create({ model, prompt, max_tokens: 40, temperature: 0, ...extra });
  return r;
}

async function streamText(params, chat) {
  const stream = chat ? await client.chat.completions.create({ ...params, stream: true })
                      : await client.completions.create({ ...params, stream: true });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    const c = chunk.choices[0];
    text += chat ? (c.delta.content || '') : c.text;
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, finish, usage, chunks };
}

async function expectStatus(promise, status, what) {
  try {
    await promise;
  } catch (e) {
    assert.strictEqual(e.status, status, `${what}: ${e}`);
    assert.ok(e.error && typeof e.error.message === 'string', `${what}: OpenAI error object`);
    return;
  }
  assert.fail(`${what}: expected HTTP ${status}`);
}

async function main() {
  const started = Date.now();
  // Models.
  const models = await client.models.list();
  assert.ok(models.data.some((m) => m.id === model), 'the served model is listed');

  // Completions: whole vs streamed, usage and the specd stats.
  const whole = await complete(PROMPTS[0]);
  const text = whole.choices[0].text;
  assert.ok(text.length > 0);
  assert.strictEqual(whole.usage.completion_tokens, 40);
  assert.strictEqual(whole.usage.total_tokens, whole.usage.prompt_tokens + 40);
  assert.ok(whole.specd && typeof whole.specd.acceptance_length === 'number');
  const streamed = await streamText({ model, prompt: PROMPTS[0], max_tokens: 40, temperature: 0,
                                      stream_options: { include_usage: true } }, false);
  assert.strictEqual(streamed.text, text, 'streamed text equals the whole response');
  assert.strictEqual(streamed.finish, 'length');
  assert.deepStrictEqual(streamed.usage, whole.usage);

  // Chat (the fixture template), streamed and not, with logprobs.
  const messages = [{ role: 'system', content: 'You write Python.' },
                    { role: 'user', content: [{ type: 'text', text: 'Reverse a string.' }] }];
  const chat = await client.chat.completions.create({ model, messages, max_completion_tokens: 24,
                                                      temperature: 0, logprobs: true, top_logprobs: 2 });
  assert.strictEqual(chat.choices[0].message.role, 'assistant');
  const lp = chat.choices[0].logprobs.content;
  assert.strictEqual(lp.length, chat.usage.completion_tokens);
  for (const e of lp) {
    assert.ok(e.logprob <= 0 && e.top_logprobs.length === 2);
    assert.ok(Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6, 'greedy picks the top token');
  }
  const chatStream = await streamText({ model, messages, max_tokens: 24, temperature: 0 }, true);
  assert.strictEqual(chatStream.text, chat.choices[0].message.content);

  // Stop sequences cut exactly, streamed and not.
  for (const [start, len] of [[5, 3], [12, 6], [20, 1], [27, 4]]) {
    const stop = text.slice(start, start + len);
    const expected = text.slice(0, text.indexOf(stop));
    const r = await complete(PROMPTS[0], { stop: ['@@never@@', stop] });
    assert.strictEqual(r.choices[0].text, expected, `stop ${JSON.stringify(stop)}`);
    assert.strictEqual(r.choices[0].finish_reason, 'stop');
    const s = await streamText({ model, prompt: PROMPTS[0], max_tokens: 40, temperature: 0, stop }, false);
    assert.strictEqual(s.text, expected, `streamed stop ${JSON.stringify(stop)}`);
  }

  // Seeds: the same seed gives the same sample, run after run.
  const sampled = { temperature: 0.9, top_p: 0.95, seed: 1234 };
  const a = await complete(PROMPTS[3], sampled);
  const b = await complete(PROMPTS[3], sampled);
  assert.strictEqual(a.choices[0].text, b.choices[0].text, 'a seed reproduces its sample');
  const seen = new Set();
  for (const seed of [1, 2, 3, 4]) seen.add((await complete(PROMPTS[3], { ...sampled, seed })).choices[0].text);
  assert.ok(seen.size >= 2, 'different seeds give different samples');

  // 16 concurrent requests equal the same requests one at a time (greedy and seeded).
  const one = [];
  for (const p of PROMPTS) one.push((await complete(p, { max_tokens: 48 })).choices[0].text);
  const together = await Promise.all(PROMPTS.map((p) => complete(p, { max_tokens: 48 })));
  together.forEach((r, i) => assert.strictEqual(r.choices[0].text, one[i], `greedy request ${i}`));
  const oneSampled = [];
  for (const [i, p] of PROMPTS.entries()) {
    oneSampled.push((await complete(p, { max_tokens: 32, ...sampled, seed: i })).choices[0].text);
  }
  const togetherSampled = await Promise.all(
      PROMPTS.map((p, i) => complete(p, { max_tokens: 32, ...sampled, seed: i })));
  togetherSampled.forEach((r, i) => assert.strictEqual(r.choices[0].text, oneSampled[i], `sampled request ${i}`));
  const streams = await Promise.all(PROMPTS.map((p) => streamText({ model, prompt: p, max_tokens: 48,
                                                                     temperature: 0 }, false)));
  streams.forEach((s, i) => assert.strictEqual(s.text, one[i], `concurrent stream ${i}`));

  // Errors come back as the client's typed errors.
  await expectStatus(client.completions.create({ model: 'no-such-model', prompt: 'x' }), 404, 'unknown model');
  await expectStatus(complete('x', { n: 2 }), 400, 'n = 2');
  await expectStatus(complete('x', { temperature: 'hot' }), 400, 'temperature type');
  await expectStatus(complete('x', { max_tokens: 10000000 }), 400, 'past the context');
  const wrongKey = new OpenAI({ baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
  await expectStatus(wrongKey.models.list(), 401, 'wrong API key');

  console.error(`openai client test passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  console.log(JSON.stringify({ greedy: one }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
