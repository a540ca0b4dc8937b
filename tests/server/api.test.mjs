// gerbil serve driven by the official openai client (and curl for the raw wire format): chat and
// completions, streamed and not, stop strings, seeds, logprobs, tool calls, json_schema, every error status.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startServer, client, post, metric, noClient, testModel, waitFor } from './support.mjs';

let server, openai;
before(async () => {
  if (noClient) return;
  server = await startServer(['--parallel', '2', '--ctx', '256']);  // the tool-call prompt is about 160 tokens
  openai = client(server);
});
after(async () => {
  if (server) assert.equal(await server.stop(), 0, 'SIGTERM exits 0');
});

const hello = [{ role: 'user', content: 'Say hello' }];
const greedy = { model: 'server_test_model', temperature: 0 };

async function streamText(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

test('chat: an answer, its usage, and the same text streamed', { skip: noClient }, async () => {
  const whole = await openai.chat.completions.create({ ...greedy, messages: hello, max_tokens: 6 });
  assert.match(whole.id, /^chatcmpl-/);
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices.length, 1);
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(whole.usage.completion_tokens, 6);
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 6);
  assert.equal(typeof whole.usage.prompt_tokens_details.cached_tokens, 'number');

  const chunks = await streamText(await openai.chat.completions.create({
    ...greedy, messages: hello, max_tokens: 6, stream: true, stream_options: { include_usage: true } }));
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  assert.equal(text, whole.choices[0].message.content);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 6);
  assert.equal(chunks.at(-2).choices[0].finish_reason, 'length');
});

test('completions: text, token-id prompts, streaming and logprobs agree', { skip: noClient }, async () => {
  const ids = (await post(server, '/tokenize', { content: 'Once upon a time' })).json.tokens;
  assert.ok(ids.length > 2);
  const byText = await openai.completions.create({ ...greedy, prompt: 'Once upon a time', max_tokens: 5, logprobs: 3 });
  const byIds = await openai.completions.create({ ...greedy, prompt: ids, max_tokens: 5 });
  assert.equal(byText.object, 'text_completion');
  assert.equal(byIds.choices[0].text, byText.choices[0].text);
  const lp = byText.choices[0].logprobs;
  assert.equal(lp.tokens.length, 5);
  assert.equal(lp.tokens.join(''), byText.choices[0].text);
  lp.top_logprobs.forEach((top, i) => {
    assert.equal(Object.keys(top).length, 3);
    // Greedy: the chosen token is the most likely one, and its log-probability is a real one.
    assert.ok(lp.token_logprobs[i] <= 0);
    for (const value of Object.values(top)) assert.ok(value <= lp.token_logprobs[i] + 1e-5);
  });
  const detok = await post(server, '/detokenize', { tokens: ids });
  assert.equal(detok.json.content, 'Once upon a time');

  const chunks = await streamText(await openai.completions.create({ ...greedy, prompt: 'Once upon a time', max_tokens: 5, stream: true }));
  assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), byText.choices[0].text);
});

test('chat logprobs: one entry per token with its top alternatives', { skip: noClient }, async () => {
  const r = await openai.chat.completions.create({ ...greedy, messages: hello, max_tokens: 4, logprobs: true, top_logprobs: 2 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 4);
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
  for (const entry of content) {
    assert.equal(entry.top_logprobs.length, 2);
    assert.equal(entry.top_logprobs[0].token, entry.token);  // greedy took the best
    assert.deepEqual(entry.bytes, [...Buffer.from(entry.token)]);
  }
});

test('streamed logprobs: one entry per token, also while its text is held back', { skip: noClient }, async () => {
  const ask = { ...greedy, prompt: 'Once upon a time', max_tokens: 6, logprobs: 1 };
  const whole = (await openai.completions.create(ask)).choices[0];
  assert.equal(whole.logprobs.tokens.length, 6);
  // A stop string that starts as the answer does but never comes: the first token's text waits until the
  // second shows it is not the stop string.
  const stop = whole.logprobs.tokens[0] + '\u2603';
  const chunks = await streamText(await openai.completions.create({ ...ask, stop: [stop], stream: true }));
  assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), whole.text);
  const streamed = chunks.flatMap((c) => c.choices[0]?.logprobs?.tokens ?? []);
  assert.deepEqual(streamed, whole.logprobs.tokens);
  assert.deepEqual(chunks.flatMap((c) => c.choices[0]?.logprobs?.token_logprobs ?? []), whole.logprobs.token_logprobs);
});

test('logit_bias: +100 on a token makes every greedy token that one', { skip: noClient }, async () => {
  const r = await openai.completions.create({ ...greedy, prompt: 'Hi', max_tokens: 3, logit_bias: { 12345: 100 } });
  const expected = await post(server, '/detokenize', { tokens: [12345, 12345, 12345] });
  assert.equal(r.choices[0].text, expected.json.content);
});

test('stop strings cut the answer before their first occurrence', { skip: noClient }, async () => {
  const free = (await openai.completions.create({ ...greedy, prompt: 'Hello', max_tokens: 12 })).choices[0].text;
  assert.ok(free.length > 4, `answer long enough to cut: ${JSON.stringify(free)}`);
  const stop = free.slice(3, 5);
  const cut = await openai.completions.create({ ...greedy, prompt: 'Hello', max_tokens: 12, stop: [stop] });
  assert.equal(cut.choices[0].text, free.slice(0, free.indexOf(stop)));
  assert.equal(cut.choices[0].finish_reason, 'stop');
});

test('the same seed gives the same sample; another seed another', { skip: noClient }, async () => {
  const ask = (seed) => openai.completions.create({ model: greedy.model, prompt: 'Hi', max_tokens: 8, temperature: 1, seed });
  const [a, b, c] = await Promise.all([ask(42), ask(42), ask(43)]);
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.notEqual(a.choices[0].text, c.choices[0].text);
});

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    // Enums and integers end within a few tokens: a random-weight model inside a free string seldom closes it
    // before max_tokens, and a cut answer is valid JSON only up to the cut.
    parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Rome', 'Oslo'] }, days: { type: 'integer' } }, required: ['city', 'days'] },
  },
};

test('tool calls: a named call comes back with JSON arguments, and its result goes back in', { skip: noClient }, async () => {
  const messages = [{ role: 'user', content: 'Weather in Paris?' }];
  const r = await openai.chat.completions.create({ ...greedy, messages, tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 60 });
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.ok(['Paris', 'Rome', 'Oslo'].includes(args.city));
  assert.ok(Number.isInteger(args.days));
  const next = await openai.chat.completions.create({
    ...greedy, max_tokens: 3, tools: [weatherTool],
    messages: [...messages, r.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'sunny, 24 C' }] });
  assert.ok(next.usage.prompt_tokens > r.usage.prompt_tokens + 5);
  // A call cut off by max_tokens says so: its arguments are not whole.
  const cut = await openai.chat.completions.create({ ...greedy, messages, tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 3 });
  assert.equal(cut.choices[0].finish_reason, 'length');
  assert.throws(() => JSON.parse(cut.choices[0].message.tool_calls[0].function.arguments));
});

test('tool_choice required gives one call to a tool; none gives text; json_object an object', { skip: noClient }, async () => {
  const messages = [{ role: 'user', content: 'Weather in Oslo?' }];
  // The random model puts runs of whitespace between the call's tokens: it needs more room than the shared
  // server's context leaves after the tools' prompt.
  const roomy = await startServer(['--ctx', '512']);
  const ask = { ...greedy, messages, tools: [weatherTool], tool_choice: 'required', max_tokens: 320 };
  let required, streamed, pieces = 0;
  try {
    required = await client(roomy).chat.completions.create(ask);
    // The same call streamed, put together by the client library's own stream helper: it opens once and its
    // arguments come in several pieces.
    const stream = client(roomy).chat.completions.stream(ask);
    stream.on('chunk', (chunk) => { pieces += (chunk.choices[0]?.delta?.tool_calls ?? []).length; });
    streamed = await stream.finalChatCompletion();
  } finally {
    assert.equal(await roomy.stop(), 0);
  }
  assert.deepEqual(streamed.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments]),
                   required.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments]));
  assert.equal(streamed.choices[0].finish_reason, 'tool_calls');
  assert.ok(pieces > 2, `the call came in ${pieces} pieces`);
  assert.equal(required.choices[0].finish_reason, 'tool_calls', JSON.stringify(required.choices[0]));
  assert.equal(required.choices[0].message.tool_calls.length, 1);
  assert.equal(required.choices[0].message.tool_calls[0].function.name, 'get_weather');
  assert.ok(['Paris', 'Rome', 'Oslo'].includes(JSON.parse(required.choices[0].message.tool_calls[0].function.arguments).city));
  const none = await openai.chat.completions.create({ ...greedy, messages, tools: [weatherTool], tool_choice: 'none', max_tokens: 5 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.equal(none.usage.completion_tokens, 5);
  const object = await openai.chat.completions.create({ ...greedy, messages: hello, max_tokens: 40, response_format: { type: 'json_object' } });
  const content = object.choices[0].message.content;
  if (object.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(content), 'object');
  else assert.ok(content.startsWith('{'), content);
});

test('a follow-up request reuses the conversation it extends (cached_tokens)', { skip: noClient }, async () => {
  const first = [{ role: 'user', content: 'Name three rivers of Europe, please.' }];
  const answer = await openai.chat.completions.create({ ...greedy, messages: first, max_tokens: 8 });
  const followUp = [...first, answer.choices[0].message, { role: 'user', content: 'And one in Asia?' }];
  const next = await openai.chat.completions.create({ ...greedy, messages: followUp, max_tokens: 4 });
  assert.ok(next.usage.prompt_tokens_details.cached_tokens >= answer.usage.prompt_tokens - 1,
    `cached ${next.usage.prompt_tokens_details.cached_tokens} of the first prompt's ${answer.usage.prompt_tokens}`);
  assert.ok(next.usage.prompt_tokens_details.cached_tokens < next.usage.prompt_tokens);
});

test('a request past --timeout is cancelled with a 503 that says so', { skip: noClient }, async () => {
  const slow = await startServer(['--timeout', '0.5']);
  try {
    const r = await post(slow, '/v1/completions', { prompt: 'Hi', max_tokens: 400, temperature: 0 });
    assert.equal(r.status, 503, r.text);
    assert.match(r.json.error.message, /ran past the server's timeout of 0.5 s/);
    await waitFor(async () => (await metric(slow, 'gerbil_active_sequences')) === 0, 30_000);
  } finally {
    assert.equal(await slow.stop(), 0);
  }
});

test('json_schema answers parse and validate', { skip: noClient }, async () => {
  const schema = { type: 'object', properties: { name: { enum: ['ann', 'bo'] }, tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 3 } }, required: ['name', 'tags'] };
  const r = await openai.chat.completions.create({ ...greedy, messages: hello, max_tokens: 80, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
  const value = JSON.parse(r.choices[0].message.content);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.deepEqual(Object.keys(value).sort(), ['name', 'tags']);
  assert.ok(value.name === 'ann' || value.name === 'bo');
  assert.ok(Array.isArray(value.tags) && value.tags.length <= 3 && value.tags.every((tag) => tag === 'a' || tag === 'b'));
});

test('json_schema with anyOf of objects: the answer is one branch whole; an ambiguous oneOf is a 400', { skip: noClient }, async () => {
  const branch = (kind, field, values) => ({ type: 'object', properties: { kind: { const: kind }, [field]: { enum: values } }, required: ['kind', field] });
  const schema = { type: 'object', properties: { item: { anyOf: [branch('a', 'n', [1, 2]), branch('b', 's', ['x', 'y'])] } }, required: ['item'] };
  const r = await openai.chat.completions.create({ ...greedy, messages: hello, max_tokens: 80, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
  assert.equal(r.choices[0].finish_reason, 'stop');
  const { item } = JSON.parse(r.choices[0].message.content);
  const [field, values] = item.kind === 'a' ? ['n', [1, 2]] : ['s', ['x', 'y']];
  assert.ok(['a', 'b'].includes(item.kind), JSON.stringify(item));
  assert.deepEqual(Object.keys(item).sort(), ['kind', field].sort());
  assert.ok(values.includes(item[field]), JSON.stringify(item));
  const overlapping = { oneOf: [{ type: 'object' }, { type: 'object', properties: { a: {} } }] };
  await assert.rejects(
    openai.chat.completions.create({ ...greedy, messages: hello, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: overlapping } } }),
    (e) => e.status === 400 && /branches 0 and 1 may both match one value/.test(e.message) && e.param === 'response_format.json_schema.schema');
});

test('errors: status, OpenAI error body, and the field named', { skip: noClient }, async () => {
  const expectError = async (body, status, param, pattern, endpoint = '/v1/chat/completions') => {
    const r = await post(server, endpoint, body);
    assert.equal(r.status, status, r.text);
    assert.deepEqual(Object.keys(r.json.error).sort(), ['code', 'message', 'param', 'type']);
    if (param !== undefined) assert.equal(r.json.error.param, param);
    assert.match(r.json.error.message, pattern);
  };
  await expectError('{"messages": [', 400, null, /not valid JSON/);
  await expectError({ messages: hello, temperature: 'hot' }, 400, 'temperature', /temperature.*number/);
  await expectError({ messages: hello, n: 2 }, 400, 'n', /`n` must be 1/);
  await expectError({ messages: [{ role: 'user', content: 5 }] }, 400, 'messages[0].content', /messages\[0\]\.content/);
  await expectError({ messages: hello, max_tokens: 0 }, 400, 'max_tokens', /max_tokens/);
  await expectError({ prompt: 'x '.repeat(400) }, 400, 'prompt', /prompt has \d+ tokens but the context holds 256/, '/v1/completions');
  await expectError({ messages: hello, model: 'gpt-4' }, 404, 'model', /gpt-4/);
  await expectError({ prompt: 'x', parallel_tool_calls: false }, 400, 'parallel_tool_calls', /belongs to \/v1\/chat/, '/v1/completions');
  await expectError({}, 404, null, /no endpoint POST \/v1\/nothing/, '/v1/nothing');
  await expectError({ prompt: 'x'.repeat(9 << 20) }, 413, null, /larger than/, '/v1/completions');
  // max_tokens past the context is clamped to what it holds.
  const clamped = await post(server, '/v1/completions', { prompt: 'x '.repeat(60), max_tokens: 1000, temperature: 0 });
  assert.equal(clamped.status, 200, clamped.text);
  const total = clamped.json.usage.total_tokens;
  if (clamped.json.choices[0].finish_reason === 'length') assert.equal(total, 256);
  else assert.ok(total <= 256);
});

// Sends REQUESTS on one connection, each once the answer to the one before has come whole (httplib reads no
// pipelined requests), then closes it; resolves with all the server answered.
function exchange(server, requests) {
  return new Promise((resolve, reject) => {
    let answer = '';
    let sent = 0;
    const socket = net.connect(server.port, '127.0.0.1');
    const answered = () => {  // how many whole answers (headers and Content-Length bytes) `answer` holds
      let count = 0, at = 0;
      for (;;) {
        const end = answer.indexOf('\r\n\r\n', at);
        if (end < 0) return count;
        const length = Number(/content-length: (\d+)/i.exec(answer.slice(at, end))?.[1] ?? 0);
        if (answer.length < end + 4 + length) return count;
        at = end + 4 + length;
        ++count;
      }
    };
    const next = () => {
      if (sent < requests.length) socket.write(requests[sent++]);
      else socket.end();
    };
    socket.on('connect', next);
    socket.on('data', (data) => {
      answer += data;
      if (answered() === sent) next();
    });
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}
const statuses = (answer) => [...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

test('405 for a method no endpoint serves, with an error body', { skip: noClient }, async () => {
  const answer = await exchange(server, ['TRACE /health HTTP/1.1\r\nHost: x\r\n\r\n']);
  assert.deepEqual(statuses(answer), [405]);
  assert.match(answer, /"message":"the method TRACE is not served"/);
});

// The test model in a scratch folder of the same name, FILE's JSON passed through EDIT.
function editedModel(file, edit) {
  const base = testModel();
  const dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gerbil-edited-')), 'server_test_model');
  fs.mkdirSync(dir);
  for (const name of fs.readdirSync(base)) if (name !== file) fs.symlinkSync(path.join(base, name), path.join(dir, name));
  const json = JSON.parse(fs.readFileSync(path.join(base, file), 'utf8'));
  edit(json);
  fs.writeFileSync(path.join(dir, file), JSON.stringify(json));
  return dir;
}

// A chat template that opens the model's reasoning in the prompt (as Qwen3's thinking-only releases do) and names
// no tool-call format.
const openThinkingModel = () => editedModel('tokenizer_config.json', (config) => {
  config.chat_template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}";
});

test('the sampling a request leaves out is the model\'s (generation_config.json)', { skip: noClient }, async () => {
  const model = editedModel('generation_config.json', (config) => { config.temperature = 0; });
  const greedyModel = await startServer([], { model });
  try {
    const ask = (body) => post(greedyModel, '/v1/completions', { prompt: 'Hi', max_tokens: 8, ...body });
    const [a, b, greedyText] = await Promise.all([ask({ seed: 1 }), ask({ seed: 2 }), ask({ temperature: 0 })]);
    assert.equal(a.json.choices[0].text, greedyText.json.choices[0].text);
    assert.equal(b.json.choices[0].text, greedyText.json.choices[0].text);
    const sampled = await Promise.all([ask({ seed: 1, temperature: 1 }), ask({ seed: 2, temperature: 1 })]);
    assert.notEqual(sampled[0].json.choices[0].text, sampled[1].json.choices[0].text, 'a given temperature wins');
  } finally {
    assert.equal(await greedyModel.stop(), 0);
    fs.rmSync(path.dirname(model), { recursive: true });
  }
});

test('a prompt that opened the reasoning: the schema holds after </think>; tools need a known format', { skip: noClient }, async () => {
  const model = openThinkingModel();
  const thinking = await startServer(['--ctx', '256'], { model });
  try {
    const openai = client(thinking);
    const schema = { type: 'object', properties: { name: { enum: ['ann', 'bo'] } }, required: ['name'] };
    const closeThinking = { 151668: 100 };  // </think> first: a random model would reason until max_tokens
    const r = await openai.chat.completions.create({ ...greedy, messages: hello, max_tokens: 40, logit_bias: closeThinking,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.ok(['ann', 'bo'].includes(JSON.parse(r.choices[0].message.content).name), JSON.stringify(r.choices[0].message));
    // Reasoning first: the constraint lets it run (here until max_tokens), and it is reasoning, not content.
    const reasoned = await openai.chat.completions.create({ ...greedy, messages: hello, max_tokens: 6,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
    assert.equal(reasoned.choices[0].finish_reason, 'length');
    assert.ok(reasoned.choices[0].message.reasoning_content.length > 0);
    const tools = await post(thinking, '/v1/chat/completions', { messages: hello, tools: [weatherTool] });
    assert.equal(tools.status, 400, tools.text);
    assert.equal(tools.json.error.param, 'tool_choice');
    assert.match(tools.json.error.message, /no format gerbil parses/);
    const named = await openai.chat.completions.create({ ...greedy, messages: hello, max_tokens: 60, tools: [weatherTool],
      tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    assert.ok(['Paris', 'Rome', 'Oslo'].includes(JSON.parse(named.choices[0].message.tool_calls[0].function.arguments).city));
  } finally {
    assert.equal(await thinking.stop(), 0);
    fs.rmSync(path.dirname(model), { recursive: true });
  }
});

test('401 without the API key, 200 with it (the openai client sends it)', { skip: noClient }, async () => {
  const keyed = await startServer(['--api-key', 'sesame', '--max-body-mb', '0.01']);
  try {
    // A request turned away leaves no body on its kept-alive connection: the next request there is answered.
    const body = JSON.stringify({ prompt: 'x'.repeat(6000), max_tokens: 1 });
    const both = await exchange(keyed, [
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\n\r\n${body}`,
      'GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesame\r\n\r\n']);
    assert.deepEqual(statuses(both), [401, 200], both);
    // A request without a body is checked whatever its headers say.
    const headed = await exchange(keyed, ['GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n']);
    assert.deepEqual(statuses(headed), [401], headed);
    // A chunked body is held to --max-body-mb as one with a Content-Length is.
    const chunk = 'y'.repeat(4000);
    const chunked = await exchange(keyed, [
      'POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesame\r\nTransfer-Encoding: chunked\r\n\r\n' +
      `${(4000).toString(16)}\r\n${chunk}\r\n`.repeat(5) + '0\r\n\r\n']);
    assert.equal(statuses(chunked)[0], 413, chunked);
    assert.match(chunked, /larger than 10485 bytes/);
    const bad = await post(keyed, '/v1/completions', { prompt: 'x', max_tokens: 1 }, { authorization: 'Bearer sesamf' });
    assert.equal(bad.status, 401);
    assert.equal(bad.json.error.type, 'authentication_error');
    assert.equal((await post(keyed, '/v1/completions', { prompt: 'x', max_tokens: 1 })).status, 401);
    assert.equal((await fetch(`${keyed.url}/health`)).status, 200, '/health needs no key (load balancers)');
    const r = await client(keyed, { apiKey: 'sesame' }).completions.create({ prompt: 'x', max_tokens: 1 });
    assert.equal(r.usage.completion_tokens, 1);
  } finally {
    assert.equal(await keyed.stop(), 0);
  }
});

test('503 with Retry-After while loading, 429 with Retry-After when the queue is full', { skip: noClient }, async () => {
  const busy = await startServer(['--parallel', '1', '--max-queue', '1'], { waitReady: false });
  try {
    const early = await post(busy, '/v1/completions', { prompt: 'x', max_tokens: 1 });
    const health = await fetch(`${busy.url}/health`);
    if (early.status === 503) {  // the model was still loading (device set-up alone takes longer than this)
      assert.equal(early.headers.get('retry-after'), '1');
      assert.equal(health.status === 503 || health.status === 200, true);
    }
    while ((await fetch(`${busy.url}/health`)).status !== 200) await new Promise((r) => setTimeout(r, 50));
    const long = post(busy, '/v1/completions', { prompt: 'x', max_tokens: 60, temperature: 0 });
    await new Promise((r) => setTimeout(r, 300));
    const queued = post(busy, '/v1/completions', { prompt: 'z', max_tokens: 2, temperature: 0 });
    await new Promise((r) => setTimeout(r, 100));
    const refused = await post(busy, '/v1/completions', { prompt: 'y', max_tokens: 1 });
    assert.equal(refused.status, 429, refused.text);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal((await long).status, 200);
    assert.equal((await queued).status, 200);
  } finally {
    assert.equal(await busy.stop(), 0);
  }
});

test('curl: the raw server-sent events', { skip: noClient }, () => {
  const out = execFileSync('curl', ['-sN', '-D', '-', `${server.url}/v1/chat/completions`, '-H', 'content-type: application/json',
    '-d', JSON.stringify({ messages: hello, max_tokens: 3, temperature: 0, stream: true })], { encoding: 'utf8' });
  const [head, body] = out.split('\r\n\r\n');
  assert.match(head, /content-type: text\/event-stream/i);
  const events = body.split('\n\n').filter((e) => e.length);
  for (const event of events) assert.match(event, /^data: /);
  assert.equal(events.at(-1), 'data: [DONE]');
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
  assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id));
});

test('GET /v1/models and /metrics', { skip: noClient }, async () => {
  const models = await openai.models.list();
  assert.equal(models.data[0].id, 'server_test_model');
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  for (const name of ['gerbil_requests_total{status="200"}', 'gerbil_prompt_tokens_total', 'gerbil_generation_tokens_total',
    'gerbil_queue_length', 'gerbil_active_sequences', 'gerbil_time_to_first_token_seconds_bucket', 'gerbil_time_per_output_token_seconds_count'])
    assert.ok(metrics.includes(name), name);
  // The requests before this one recorded step graphs, and took time doing it.
  assert.ok(await metric(server, 'gerbil_step_graphs_recorded_total') > 0);
  assert.ok(await metric(server, 'gerbil_step_graph_seconds_total') > 0);
});
