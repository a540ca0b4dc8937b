// Scaling out as docs/DEPLOY.md shows: `gerbil serve` replicas behind nginx on loopback; requests through nginx
// are answered by both, exactly as a replica answers directly, and a replica's 503 sends them to the other.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startServer, post, metric, waitFor } from './support.mjs';

const nginx = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => fs.existsSync(p));
const freePort = () => new Promise((resolve) => {
  const probe = net.createServer().listen(0, '127.0.0.1', () => { const { port } = probe.address(); probe.close(() => resolve(port)); });
});

// Starts nginx with docs/DEPLOY.md's configuration in front of PORTS; resolves with its URL and a stop().
async function startProxy(ports) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gerbil-nginx-'));
  const port = await freePort();
  const config = fs.readFileSync(path.join(import.meta.dirname, 'nginx.conf.in'), 'utf8')
    .replaceAll('@DIR@', dir).replaceAll('@PORT@', String(port))
    .replaceAll('@UPSTREAMS@', ports.map((p) => `server 127.0.0.1:${p} max_fails=1 fail_timeout=2s;`).join('\n    '));
  fs.writeFileSync(path.join(dir, 'nginx.conf'), config);
  const check = spawnSync(nginx, ['-t', '-p', dir, '-c', path.join(dir, 'nginx.conf')], { encoding: 'utf8' });
  assert.equal(check.status, 0, `nginx refuses the configuration: ${check.stderr}`);
  const proxy = spawn(nginx, ['-p', dir, '-c', path.join(dir, 'nginx.conf')], { stdio: 'ignore' });
  const front = { url: `http://127.0.0.1:${port}` };
  front.stop = () => {
    proxy.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(async () => (await fetch(`${front.url}/health`)).status !== 502, 20_000);
  } catch (error) {
    front.stop();
    throw error;
  }
  return front;
}

const skip = nginx ? false : 'nginx is not installed (scripts/setup.sh installs nginx-light)';

test('two replicas behind nginx', { skip }, async () => {
  const replicas = [await startServer(['--parallel', '2']), await startServer(['--parallel', '2'])];
  const front = await startProxy(replicas.map((r) => r.port));
  try {
    const body = { prompt: 'Behind the proxy', max_tokens: 5, temperature: 0 };
    const direct = await post(replicas[0], '/v1/completions', body);
    const through = await Promise.all(Array.from({ length: 8 }, () => post(front, '/v1/completions', body)));
    for (const r of through) {
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.choices[0].text, direct.json.choices[0].text);
    }
    const streamed = await post(front, '/v1/completions', { ...body, stream: true });
    assert.ok(streamed.text.endsWith('data: [DONE]\n\n'), 'streams pass through unbuffered and whole');
    for (const replica of replicas) assert.ok((await metric(replica, 'gerbil_generation_tokens_total')) > 5, 'both replicas answered');
  } finally {
    front.stop();
    for (const replica of replicas) assert.equal(await replica.stop(), 0);
  }
});

// A replica still loading or shutting down answers every completion 503 with Retry-After (as the 503 test in
// api.test.mjs shows); nginx must pass the POST on to the next replica, not the 503 back to the client.
test('a completion that meets a loading replica goes on to the next', { skip }, async () => {
  let refused = 0;
  const loading = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method === 'POST') ++refused;
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
      res.end(JSON.stringify({ error: { message: 'the model is still loading; retry shortly', type: 'server_error', param: null, code: null } }));
    });
  });
  await new Promise((resolve) => loading.listen(0, '127.0.0.1', resolve));
  const replica = await startServer();
  const front = await startProxy([loading.address().port, replica.port]);
  try {
    // Each 503 leaves the loading replica out for fail_timeout (2 s; the health checks above may have met it too),
    // so completions go on, every one answered 200, until nginx has tried it again (bounded by 20 s), and at least 4.
    const deadline = Date.now() + 20_000;
    for (let sent = 0; sent < 4 || (refused === 0 && Date.now() < deadline); ++sent) {
      const r = await post(front, '/v1/completions', { prompt: 'Hi', max_tokens: 2, temperature: 0 });
      assert.equal(r.status, 200, r.text);
      if (refused === 0) await new Promise((resolve) => setTimeout(resolve, 500));
    }
    assert.ok(refused > 0, 'nginx tried the loading replica');
  } finally {
    front.stop();
    loading.close();
    assert.equal(await replica.stop(), 0);
  }
});
