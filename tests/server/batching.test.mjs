// Continuous batching through the server: 16 concurrent greedy requests of different lengths return exactly
// what each returns alone, and a request whose client hangs up, streamed or not, frees its slot (the metrics
// show it).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, client, metric, noClient, waitFor } from './support.mjs';

let server, openai;
before(async () => {
  if (noClient) return;
  server = await startServer(['--parallel', '16', '--ctx', '128']);
  openai = client(server);
});
after(async () => {
  if (server) assert.equal(await server.stop(), 0);
});

const words = ['river', 'stone', 'lamp', 'violet', 'north', 'seven', 'garden', 'copper'];
const prompts = Array.from({ length: 16 }, (_, i) =>
  Array.from({ length: 1 + ((i * 5) % 23) }, (_, j) => words[(i + j * 3) % words.length]).join(' '));
const ask = (prompt, i) => openai.completions.create({ prompt, max_tokens: 3 + (i % 6), temperature: 0 });

test('16 concurrent greedy requests answer as each does alone', { skip: noClient }, async () => {
  const alone = [];
  for (const [i, prompt] of prompts.entries()) alone.push((await ask(prompt, i)).choices[0]);
  const together = await Promise.all(prompts.map(ask));
  together.forEach((r, i) => {
    assert.equal(r.choices[0].text, alone[i].text, `request ${i}`);
    assert.equal(r.choices[0].finish_reason, alone[i].finish_reason, `request ${i}`);
  });
  // Steps queued ahead of the host, and those taken (here few: some sequence ends at almost every step, and none is
  // queued before a step that ends one).
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const count = (name) => Number(text.match(new RegExp(`^${name} (\\d+)$`, 'm'))?.[1]);
  const taken = count('gerbil_steps_ahead_taken_total'), queued = count('gerbil_steps_ahead_queued_total');
  assert.ok(taken <= queued, `${taken} of ${queued} taken`);
});

test('a stream abandoned mid-way is cancelled and frees its slot', { skip: noClient }, async () => {
  const cancelledBefore = await metric(server, 'gerbil_sequences_cancelled_total');
  const controller = new AbortController();
  const stream = await openai.chat.completions.create(
    { messages: [{ role: 'user', content: 'Tell a long story' }], max_tokens: 100, temperature: 0, stream: true },
    { signal: controller.signal });
  let chunks = 0;
  for await (const _ of stream) {  // the client ends the stream quietly after its first chunk
    ++chunks;
    controller.abort();
    break;
  }
  assert.equal(chunks, 1);
  await waitFor(async () => (await metric(server, 'gerbil_sequences_cancelled_total')) > cancelledBefore, 30_000);
  await waitFor(async () => (await metric(server, 'gerbil_active_sequences')) === 0, 30_000);
  // The server still answers.
  assert.equal((await ask('again', 0)).choices[0].text, (await ask('again', 0)).choices[0].text);
});

test('a request that is not streamed is cancelled too when its client hangs up', { skip: noClient }, async () => {
  const cancelledBefore = await metric(server, 'gerbil_sequences_cancelled_total');
  const generatedBefore = await metric(server, 'gerbil_generation_tokens_total');
  const controller = new AbortController();
  const asked = openai.completions.create({ prompt: 'Tell a long story', max_tokens: 120, temperature: 0 },
    { signal: controller.signal });
  await waitFor(async () => (await metric(server, 'gerbil_active_sequences')) === 1, 30_000);
  controller.abort();
  await assert.rejects(asked);
  await waitFor(async () => (await metric(server, 'gerbil_sequences_cancelled_total')) > cancelledBefore, 30_000);
  await waitFor(async () => (await metric(server, 'gerbil_active_sequences')) === 0, 30_000);
  assert.ok((await metric(server, 'gerbil_generation_tokens_total')) - generatedBefore < 120, 'it stopped early');
  assert.match(server.log(), /POST \/v1\/completions 499 /);
});
