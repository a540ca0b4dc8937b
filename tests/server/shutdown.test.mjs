// SIGINT / SIGTERM end gerbil serve as docs/DEPLOY.md says: the first stops taking requests (503) and lets the
// running ones finish, a second cancels them; the server exits 0 either way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, client, post, noClient, waitFor } from './support.mjs';

const maxTokens = 200;

// Starts a server and a greedy stream of `maxTokens` tokens on it; resolves once its first chunk came.
async function serverWithStream() {
  const server = await startServer(['--parallel', '2', '--ctx', '512']);
  const stream = await client(server).completions.create({
    prompt: 'Once upon a time', max_tokens: maxTokens, temperature: 0, stream: true,
    stream_options: { include_usage: true } });
  const chunks = [];
  const read = (async () => { for await (const chunk of stream) chunks.push(chunk); })();
  await waitFor(async () => chunks.length > 1, 60_000);
  return { server, chunks, read };
}

test('the first signal lets a running stream finish and refuses new requests', { skip: noClient }, async () => {
  const { server, chunks, read } = await serverWithStream();
  server.child.kill('SIGTERM');
  await waitFor(async () => (await fetch(`${server.url}/health`)).status === 503, 30_000);
  const refused = await post(server, '/v1/completions', { prompt: 'Hi', max_tokens: 2 });
  assert.equal(refused.status, 503);
  assert.equal(refused.json.error.message, 'the server is shutting down');
  await read;
  assert.equal(chunks.at(-2).choices[0].finish_reason, 'length');
  assert.equal(chunks.at(-1).usage.completion_tokens, maxTokens);
  assert.equal(await server.exited, 0);
});

test('a second signal cancels the running stream, which ends with an error', { skip: noClient }, async () => {
  const { server, chunks, read } = await serverWithStream();
  server.child.kill('SIGTERM');
  await waitFor(async () => (await fetch(`${server.url}/health`)).status === 503, 30_000);
  server.child.kill('SIGINT');
  await assert.rejects(read, /the server is shutting down: the request was cancelled/);
  assert.ok(chunks.length < maxTokens, `${chunks.length} chunks`);
  assert.ok(chunks.every((chunk) => chunk.choices[0]?.finish_reason == null), 'no chunk says the answer ended');
  assert.equal(await server.exited, 0);
  assert.match(server.log(), /stopping: cancelling the running requests/);
});
