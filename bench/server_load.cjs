// A bounded load test for `specd serve`: N concurrent streaming clients for D seconds on
// loopback. Reports throughput, time to first token and per-token latency percentiles, errors
// and the server's RSS before and after, as one JSON object on stdout.
//
//   node bench/server_load.cjs --url http://127.0.0.1:PORT/v1 --model NAME [--pid PID]
//        [--concurrency 64] [--seconds 60] [--max-tokens 64] [--temperature 0] [--key KEY]
'use strict';
const fs = require('fs');

const args = { concurrency: 64, seconds: 60, 'max-tokens': 64, temperature: 0, key: '' };
for (let i = 2; i + 1 < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const concurrency = Math.min(256, Math.max(1, Number(args.concurrency)));
const seconds = Math.min(600, Math.max(1, Number(args.seconds)));
const url = new URL(args.url);
if (url.hostname !== '127.0.0.1' && url.hostname !== 'localhost') throw new Error('loopback only');

const PROMPTS = ['def fibonacci(n):\n', 'import os\n\ndef list_files(path):\n', 'class Stack:\n',
                 'def is_prime(n):\n', 'def merge_sort(items):\n', 'def read_json(path):\n',
                 'async def fetch(url):\n', 'def gcd(a, b):\n'];

function rss() {
  if (!args.pid) return null;
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${args.pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : null;
}

function percentile(values, p) {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

async function oneRequest(i, stats) {
  const start = performance.now();
  const body = JSON.stringify({ model: args.model, prompt: PROMPTS[i % PROMPTS.length],
                                max_tokens: Number(args['max-tokens']), stream: true,
                                temperature: Number(args.temperature), seed: i,
                                stream_options: { include_usage: true } });
  const headers = { 'Content-Type': 'application/json' };
  if (args.key) headers.Authorization = `Bearer ${args.key}`;
  const response = await fetch(`${args.url}/completions`, { method: 'POST', body, headers });
  if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
  const decoder = new TextDecoder();
  let buffer = '', first = null, tokens = 0, done = false;
  for await (const piece of response.body) {
    buffer += decoder.decode(piece, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith('data: ')) continue;
      const data = event.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
      if (first === null && chunk.choices.length && chunk.choices[0].text) first = performance.now();
    }
  }
  if (!done) throw new Error('stream ended without [DONE]');
  const end = performance.now();
  stats.tokens += tokens;
  if (first !== null) {
    stats.ttft.push((first - start) / 1000);
    if (tokens > 1) stats.perToken.push((end - first) / 1000 / (tokens - 1));
  }
  stats.requests += 1;
}

async function main() {
  const stats = { requests: 0, errors: 0, tokens: 0, ttft: [], perToken: [], errorSamples: [] };
  const rssBefore = rss();
  const began = performance.now();
  const deadline = began + seconds * 1000;
  let next = 0;
  async function worker() {
    while (performance.now() < deadline) {
      try {
        await oneRequest(next++, stats);
      } catch (e) {
        stats.errors += 1;
        if (stats.errorSamples.length < 5) stats.errorSamples.push(String(e));
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsed = (performance.now() - began) / 1000;
  const rssAfter = rss();
  console.log(JSON.stringify({
    concurrency, seconds_requested: seconds, seconds_elapsed: elapsed,
    max_tokens: Number(args['max-tokens']), temperature: Number(args.temperature),
    requests: stats.requests, errors: stats.errors, error_samples: stats.errorSamples,
    generated_tokens: stats.tokens, tokens_per_second: stats.tokens / elapsed,
    ttft_p50_s: percentile(stats.ttft, 0.5), ttft_p99_s: percentile(stats.ttft, 0.99),
    per_token_p50_s: percentile(stats.perToken, 0.5), per_token_p99_s: percentile(stats.perToken, 0.99),
    rss_before_bytes: rssBefore, rss_after_bytes: rssAfter,
  }, null, 2));
}

main().catch((e) => { console.error(e); process.exit(1); });
