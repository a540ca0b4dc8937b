// A bounded load test on loopback: CLIENTS clients for SECONDS seconds send greedy requests with random
// prompts (from a set whose answers were taken alone first), some streamed, some read slowly, some dropped
// mid-stream or before a whole answer. Zero 5xx, every finished answer exactly its prompt's, the server's memory
// flat, and the server answers afterwards.
import fs from 'node:fs';
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

// A request that is not streamed, abandoned after DELAY_MS.
async function abandoned(body, delayMs) {
  const controller = new AbortController();
  setTimeout(() => controller.abort(), delayMs);
  try {
    await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
                                                  body: JSON.stringify(body), signal: controller.signal });
  } catch {}
}

// The server's resident memory, in MiB.
const residentMiB = () => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${server.child.pid}/status`, 'utf8'))[1]) / 1024;

test(`${clients} clients for ${seconds} s: no 5xx, no lost or mixed answers, memory flat`, { skip: noClient, timeout: (seconds + 240) * 1000 }, async () => {
  const prompts = Array.from({ length: 6 }, (_, i) => 'pebble '.repeat(1 + i * 7) + `number ${i}`);
  const expected = [];
  for (const prompt of prompts) expected.push((await openai.completions.create({ prompt, max_tokens: 8, temperature: 0 })).choices[0].text);

  // Every path once (whole, streamed, dropped, abandoned) before memory is taken as the baseline.
  await rawStream({ prompt: prompts[0], max_tokens: 8, temperature: 0, stream: true }, { readChunks: 2 });
  await abandoned({ prompt: prompts[1], max_tokens: 64, temperature: 0 }, 20);
  const memoryBefore = residentMiB();
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
      if (kind < 0.05) {
        await abandoned(body, 10 + Math.random() * 40);
        counts.dropped++;
      } else if (kind < 0.4) {
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
  // Flat: what the load left behind is far less than a request's worth of anything a leak would keep.
  const grown = residentMiB() - memoryBefore;
  assert.ok(grown < 64, `the server's memory grew by ${grown.toFixed(1)} MiB over ${counts.ok + counts.dropped} requests`);
  console.log(`# ${JSON.stringify(counts)}, memory ${memoryBefore.toFixed(1)} MiB -> +${grown.toFixed(1)} MiB`);
  const after = await openai.completions.create({ prompt: prompts[0], max_tokens: 8, temperature: 0 });
  assert.equal(after.choices[0].text, expected[0]);
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  assert.doesNotMatch(metrics, /gerbil_requests_total\{status="5\d\d"\}/);
});
