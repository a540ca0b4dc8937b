// Shared by the server tests: a tiny synthetic Qwen3 model with the real Qwen3 tokenizer and chat template,
// `gerbil serve` started on a free loopback port, and the official openai client pointed at it.
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

export const source = process.env.GERBIL_SOURCE_DIR ?? path.resolve(import.meta.dirname, '../..');
export const binary = process.env.GERBIL_BINARY ?? path.join(source, 'build/gerbil');
const nodeModules = process.env.GERBIL_NODE_MODULES ?? path.join(source, '.deps/node_modules');

// The openai package, or null (tests then skip, saying why).
export function openaiModule() {
  try {
    return createRequire(import.meta.url)(path.join(nodeModules, 'openai'));
  } catch {
    return null;
  }
}
export const noClient = openaiModule() ? false : `the openai package is not in ${nodeModules} (scripts/setup.sh installs it)`;

// A tiny random Qwen3 (2 layers, hidden 64) whose vocabulary is the real tokenizer's, made once per build.
export function testModel() {
  const dir = process.env.GERBIL_SERVER_MODEL ?? path.join(path.dirname(binary), 'server_test_model');
  if (fs.existsSync(path.join(dir, 'ready'))) return dir;
  const tokenizer = path.join(source, '.deps/tokenizers/qwen3');
  const vocab = 151669;  // the Qwen3 tokenizer's ids, added tokens included
  execFileSync(binary, ['synth', '--preset', 'tiny-qwen3', '--vocab', String(vocab), '--seed', '5', '--out', dir]);
  for (const file of ['tokenizer.json', 'tokenizer_config.json'])
    fs.copyFileSync(path.join(tokenizer, file), path.join(dir, file));
  // <|im_end|> ends an answer, as in Qwen3's own generation_config.json.
  for (const file of ['config.json', 'generation_config.json']) {
    const json = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
    json.eos_token_id = 151645;
    if (file === 'config.json') json.max_position_embeddings = 512;
    fs.writeFileSync(path.join(dir, file), JSON.stringify(json, null, 2));
  }
  fs.writeFileSync(path.join(dir, 'ready'), '');
  return dir;
}

// Starts `gerbil serve` on a free port; resolves once /health says ready. The result's stop() sends SIGTERM
// and resolves with the exit code.
export async function startServer(args = [], { model = testModel(), waitReady = true } = {}) {
  const child = spawn(binary, ['serve', '--model', model, '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    child.stderr.on('data', (data) => {
      log += data;
      const match = /listening on http:\/\/[^:]+:(\d+)/.exec(log);
      if (match) resolve(Number(match[1]));
    });
    child.on('exit', (code) => reject(new Error(`gerbil serve exited with ${code}:\n${log}`)));
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  const server = {
    port,
    url: `http://127.0.0.1:${port}`,
    child,
    log: () => log,
    exited,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
  if (waitReady) await waitFor(async () => (await fetch(`${server.url}/health`)).status === 200, 120_000);
  return server;
}

export async function waitFor(condition, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await condition()) return;
    } catch {}
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function client(server, options = {}) {
  const { default: OpenAI } = openaiModule();
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey: options.apiKey ?? 'unused', maxRetries: 0, ...options });
}

// POSTs JSON; resolves with {status, headers, json}.
export async function post(server, endpoint, body, headers = {}) {
  const response = await fetch(server.url + endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: response.status, headers: response.headers, json, text };
}

// The value of metric NAME (with LABELS, e.g. '{status="200"}') in the server's /metrics text.
export async function metric(server, name) {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line === undefined ? 0 : Number(line.slice(name.length + 1));
}
