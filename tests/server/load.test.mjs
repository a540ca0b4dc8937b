// A bounded load test on loopback: CLIENTS clients for SECONDS seconds send greedy requests with random
// prompts (from a set whose answers were taken alone first), some streamed, some read slowly, some dropped
// mid-stream. Zero 5xx, every finished answer exactly its prompt's, and the server answers afterwards.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startServer, client, metric, noClient, waitFor } from './support.mjs';

const clients = Number(process.env.GERBIL_LOAD_CLIENTS ?? 16);
const seconds = Number(process.env.GERBIL_LOAD_SECONDS ?? 20);

let server, openai;
before(async () => {
  if (noClient) return;
  server = await startServer(['--parallel', '8', '--max-queue', '64', '--ctx', '96']);
  openai = client(server);
});
after(async () => {
  if (server) assert.equal(await server.stop(), 0);
});

// A raw streamed request that reads at most `readChunks` chunks, slowly, then hangs up (or reads all).
function rawStream(body, { readChunks = Infinity, delayMs = 0 }) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '', seen = 0;
      res.on('data', async (data) => {
        text += data;
        if (delayMs) { res.pause(); setTimeout(() => res.resume(), delayMs); }
        if (++seen >= readChunks) { req.destroy(); resolve({ status: res.statusCode, dropped: true }); }
      });
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    req.on('error', (e) => (e.code === 'ECONNRESET' ? resolve({ dropped: true }) : reject(e)));
    req.end(JSON.stringify(body));
  });
}

test(`${clients} clients for ${seconds} s: no 5xx, no lost or mixed answers`, { skip: noClient, timeout: (seconds + 240) * 1000 }, async () => {
  const prompts = Array.from({ length: 6 }, (_, i) => 'pebble '.repeat(1 + i * 7) + `number ${i}`);
  const expected = [];
  for (const prompt of prompts) expected.push((await openai.completions.create({ prompt, max_tokens: 8, temperature: 0 })).choices[0].text);

  const counts = { ok: 0, dropped: 0, refused: 0 };
  const end = Date.now() + seconds * 1000;
  // Each client runs for the whole time and until it has had one answer, so a slow machine still checks every
  // client's answers (the count of answers is not a speed assertion).
  const worker = async () => {
    let answered = 0;
    const ok = () => { counts.ok++; answered++; };
    while (Date.now() < end || answered === 0) {
      const i = Math.floor(Math.random() * prompts.length);
      const body = { prompt: prompts[i], max_tokens: 8, temperature: 0 };
      const kind = Math.random();
      if (kind < 0.4) {
        const r = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        assert.ok(r.status < 500, `status ${r.status}`);
        if (r.status === 429) { counts.refused++; continue; }
        assert.equal(r.status, 200);
        assert.equal((await r.json()).choices[0].text, expected[i], `prompt ${i}`);
        ok();
      } else {
        const drop = kind > 0.8;
        const r = await rawStream({ ...body, stream: true }, { readChunks: drop ? 2 : Infinity, delayMs: kind > 0.65 && !drop ? 30 : 0 });
        if (r.dropped) { counts.dropped++; continue; }
        assert.ok(r.status < 500, `status ${r.status}`);
        if (r.status === 429) { counts.refused++; continue; }
        const events = r.text.split('\n\n').filter((e) => e.startsWith('data: {'));
        const text = events.map((e) => JSON.parse(e.slice(6)).choices[0]?.text ?? '').join('');
        assert.equal(text, expected[i], `streamed prompt ${i}`);
        assert.ok(r.text.endsWith('data: [DONE]\n\n'));
        ok();
      }
    }
  };
  await Promise.all(Array.from({ length: clients }, worker));
  assert.ok(counts.ok >= clients, JSON.stringify(counts));
  await waitFor(async () => (await metric(server, 'gerbil_active_sequences')) === 0, 60_000);
  assert.equal(await metric(server, 'gerbil_queue_length'), 0);
  const after = await openai.completions.create({ prompt: prompts[0], max_tokens: 8, temperature: 0 });
  assert.equal(after.choices[0].text, expected[0]);
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  assert.doesNotMatch(metrics, /gerbil_requests_total\{status="5\d\d"\}/);
});
