// Scaling out as docs/DEPLOY.md shows: two `gerbil serve` replicas behind nginx on loopback; requests
// through nginx are answered by both, exactly as a replica answers directly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startServer, post, metric, waitFor } from './support.mjs';

const nginx = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => fs.existsSync(p));
const freePort = () => new Promise((resolve) => {
  const probe = net.createServer().listen(0, '127.0.0.1', () => { const { port } = probe.address(); probe.close(() => resolve(port)); });
});

test('two replicas behind nginx', { skip: nginx ? false : 'nginx is not installed (scripts/setup.sh installs nginx-light)' }, async () => {
  const replicas = [await startServer(['--parallel', '2']), await startServer(['--parallel', '2'])];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gerbil-nginx-'));
  const port = await freePort();
  const config = fs.readFileSync(path.join(import.meta.dirname, 'nginx.conf.in'), 'utf8')
    .replaceAll('@DIR@', dir).replaceAll('@PORT@', String(port))
    .replaceAll('@UPSTREAMS@', replicas.map((r) => `server 127.0.0.1:${r.port} max_fails=1 fail_timeout=2s;`).join('\n    '));
  fs.writeFileSync(path.join(dir, 'nginx.conf'), config);
  const check = spawnSync(nginx, ['-t', '-p', dir, '-c', path.join(dir, 'nginx.conf')], { encoding: 'utf8' });
  assert.equal(check.status, 0, `nginx refuses the configuration: ${check.stderr}`);
  const proxy = spawn(nginx, ['-p', dir, '-c', path.join(dir, 'nginx.conf')], { stdio: 'ignore' });
  try {
    const front = { url: `http://127.0.0.1:${port}` };
    await waitFor(async () => (await fetch(`${front.url}/health`)).status === 200, 20_000);
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
    proxy.kill('SIGTERM');
    for (const replica of replicas) assert.equal(await replica.stop(), 0);
  }
});
