// interop.mjs runs Terrarium plugins built with the Go SDK under the Extism JavaScript
// SDK (@extism/extism), with terrarium:host/v1 implemented here, in JavaScript, over an
// in-memory session (abi/ABI.md, section 3). It proves that the plugin ABI is what
// ABI.md says, not whatever Terrarium's own Go host happens to accept.
//
// Usage: node interop.mjs <calculator.wasm> <scratchpad.wasm> <offline.wasm>
//
// The modules are told apart by the name their terrarium_describe reports, so the order
// of the arguments does not matter. On success the script prints one line of JSON on
// stdout (a summary with "ok": true) and exits 0; on any failure it prints the reason on
// stderr and exits 1. Progress goes to stderr.

import { readFile } from 'node:fs/promises';
import createPlugin from '@extism/extism';

const HOST_MODULE = 'terrarium:host/v1';
const ABI_VERSION = 1;
const MAX_CHUNK = 1 << 20; // ABI.md, section 4
const RESULT_OK = 0;
const RESULT_ERROR = 1;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** HostError is an error a host function reports in its result block. */
class HostError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/** CheckError is a check that does not hold: reported by its message alone. */
class CheckError extends Error {}

/** fail ends the script with a message: any check that does not hold. */
function fail(message) {
  throw new CheckError(message);
}

function check(cond, message) {
  if (!cond) fail(message);
}

function progress(message) {
  process.stderr.write(`interop: ${message}\n`);
}

const sameJSON = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// ---------------------------------------------------------------------------
// The session the host functions act on: a custom state, messages and artifacts, all
// in memory. The state starts with a key of its own, which the scratchpad must keep.

const session = {
  id: 'js-session-1',
  state: { owner: 'js' },
  messages: [],
  artifacts: new Map(),
};

const config = { greeting: 'hi' };

/** hostCalls counts the calls of each host function, over all plugins. */
const hostCalls = {};

/** logs holds what plugins logged through the log host function. */
const logs = [];

// ---------------------------------------------------------------------------
// Blocks and result blocks.

/** readArg returns the bytes of an argument block; offset 0 is an empty argument. */
function readArg(cc, offset) {
  if (offset === 0n) return new Uint8Array(0);
  const out = cc.read(offset);
  if (out === null) {
    throw new HostError('invalid_input', `no block at offset 0x${offset.toString(16)}`);
  }
  return out.bytes();
}

function readText(cc, offset) {
  try {
    return decoder.decode(readArg(cc, offset));
  } catch (e) {
    if (e instanceof HostError) throw e;
    throw new HostError('invalid_input', `the argument is not UTF-8: ${e.message}`);
  }
}

function readJSON(cc, offset, what) {
  const text = readText(cc, offset);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new HostError('invalid_input', `${what}: ${e.message}`);
  }
}

/** result stores a result block: a tag byte, then the payload. */
function result(cc, tag, payload) {
  const bytes = typeof payload === 'string' ? encoder.encode(payload) : payload;
  const block = new Uint8Array(1 + bytes.length);
  block[0] = tag;
  block.set(bytes, 1);
  return cc.store(block);
}

const ok = (cc, payload = new Uint8Array(0)) => result(cc, RESULT_OK, payload);

const err = (cc, code, message) => result(cc, RESULT_ERROR, JSON.stringify({ code, message }));

// ---------------------------------------------------------------------------
// terrarium:host/v1, for one plugin. A host function must never throw: an exception
// would unwind through the guest's stack and leave its instance unusable, so every
// failure becomes an error result block.

function hostFunctions(plugin) {
  const fns = {
    session_id(cc) {
      return ok(cc, session.id);
    },
    state_get(cc) {
      return ok(cc, JSON.stringify(session.state));
    },
    state_set(cc, stateOff) {
      const state = readJSON(cc, stateOff, 'state');
      if (state !== null && (typeof state !== 'object' || Array.isArray(state))) {
        throw new HostError('invalid_input', 'the state must be a JSON object (or null)');
      }
      session.state = state;
      return ok(cc);
    },
    messages_get(cc) {
      return ok(cc, JSON.stringify(session.messages));
    },
    messages_append(cc, msgsOff) {
      session.messages.push(...readMessages(cc, msgsOff));
      return ok(cc);
    },
    messages_set(cc, msgsOff) {
      session.messages = readMessages(cc, msgsOff);
      return ok(cc);
    },
    artifact_add(cc, artifactOff) {
      const a = readJSON(cc, artifactOff, 'artifact');
      if (a === null || typeof a !== 'object' || typeof a.name !== 'string') {
        throw new HostError('invalid_input', 'an artifact is an object with a name');
      }
      session.artifacts.set(a.name, a);
      return ok(cc);
    },
    stream(cc, chunkOff) {
      const data = readArg(cc, chunkOff);
      if (data.length > MAX_CHUNK) {
        throw new HostError('limit_exceeded', `a chunk of ${data.length} bytes exceeds the limit of ${MAX_CHUNK}`);
      }
      if (plugin.current === null) {
        throw new HostError('internal', 'stream called outside a call');
      }
      plugin.current.chunks.push(readJSON(cc, chunkOff, 'chunk'));
      return ok(cc);
    },
    config_get(cc, keyOff) {
      const key = readText(cc, keyOff);
      if (!Object.hasOwn(config, key)) {
        throw new HostError('permission_denied', `config key ${JSON.stringify(key)} is not granted`);
      }
      return ok(cc, config[key]);
    },
    secret_get(cc, nameOff) {
      const name = readText(cc, nameOff);
      throw new HostError('permission_denied', `secret ${JSON.stringify(name)} is not granted readable`);
    },
    http_request(cc, reqOff, _bodyOff) {
      const req = readJSON(cc, reqOff, 'request');
      throw new HostError('permission_denied', `this host grants no HTTP (asked for ${req?.method} ${req?.url})`);
    },
    http_read(cc, handle, _max) {
      throw new HostError('not_found', `no open response with handle ${handle}`);
    },
    http_close(cc, handle) {
      throw new HostError('not_found', `no open response with handle ${handle}`);
    },
    log(cc, level, msgOff) {
      logs.push({ plugin: plugin.name, level: Number(BigInt.asIntN(64, level)), message: readText(cc, msgOff) });
      return ok(cc);
    },
  };
  const wrapped = {};
  for (const [name, fn] of Object.entries(fns)) {
    wrapped[name] = (cc, ...args) => {
      hostCalls[name] = (hostCalls[name] ?? 0) + 1;
      try {
        return fn(cc, ...args);
      } catch (e) {
        if (e instanceof HostError) return err(cc, e.code, e.message);
        return err(cc, 'internal', `${name}: ${e?.stack ?? e}`);
      }
    };
  }
  return wrapped;
}

function readMessages(cc, offset) {
  const msgs = readJSON(cc, offset, 'messages');
  if (!Array.isArray(msgs)) throw new HostError('invalid_input', 'messages: not a JSON array');
  msgs.forEach((m, i) => {
    if (m === null || typeof m !== 'object') throw new HostError('invalid_input', `messages[${i}] is not an object`);
  });
  return msgs;
}

// ---------------------------------------------------------------------------
// Plugins.

/**
 * load creates an Extism plugin from a wasm file and describes it. WASI is on (a Go
 * module needs its clocks and random source); the SDK calls the reactor's _initialize
 * itself, through node:wasi's initialize, when it instantiates the module.
 */
async function load(path) {
  const plugin = { path, name: null, current: null, extism: null, descriptor: null };
  plugin.extism = await createPlugin(
    { wasm: [{ data: await readFile(path) }], config },
    {
      useWasi: true,
      runInWorker: false,
      functions: { [HOST_MODULE]: hostFunctions(plugin) },
      logger: console,
    },
  );
  const imports = await plugin.extism.getImports();
  const hostImports = imports.filter((i) => i.module === HOST_MODULE).map((i) => i.name).sort();
  plugin.descriptor = (await call(plugin, 'terrarium_describe')).json;
  plugin.name = plugin.descriptor?.name;
  plugin.hostImports = hostImports;
  return plugin;
}

/**
 * call calls an export and returns {json, chunks} on success, {error, chunks} when the
 * plugin set an error (the error decoded as ABI.md says: JSON, else internal). Anything
 * else (a trap, an exception from the SDK) is thrown.
 */
async function call(plugin, exportName, input) {
  plugin.current = { chunks: [] };
  const arg = input === undefined ? undefined : typeof input === 'string' ? input : JSON.stringify(input);
  try {
    let out;
    try {
      out = await plugin.extism.call(exportName, arg);
    } catch (e) {
      // The SDK reports an error_set as an exception with this prefix; a trap is a
      // WebAssembly.RuntimeError or another exception without it.
      const prefix = 'Plugin-originated error: ';
      const msg = String(e?.message ?? e);
      if (!msg.startsWith(prefix)) {
        throw new Error(`${plugin.name ?? plugin.path}: ${exportName} failed (not a plugin error): ${e?.stack ?? e}`);
      }
      return { error: decodeError(msg.slice(prefix.length)), chunks: plugin.current.chunks };
    }
    if (out === null) {
      return { json: null, chunks: plugin.current.chunks };
    }
    const text = out.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch (e) {
      fail(`${plugin.name ?? plugin.path}: ${exportName}: the output is not JSON: ${e.message}: ${text.slice(0, 200)}`);
    }
    return { json, chunks: plugin.current.chunks };
  } finally {
    plugin.current = null;
    // ABI.md: all blocks are released when the call ends. The JS SDK keeps them until
    // reset (its foreground plugin never frees a block by itself), so release them here;
    // the output was read above.
    if (!(await plugin.extism.reset())) fail(`${plugin.name ?? plugin.path}: reset after ${exportName} failed`);
  }
}

function decodeError(text) {
  try {
    const e = JSON.parse(text);
    if (e && typeof e.code === 'string' && e.code !== '') return e;
  } catch {
    // not JSON: an internal error carrying the text
  }
  return { code: 'internal', message: text };
}

/** mustOK returns the output of a call that must succeed. */
function mustOK(res, what) {
  if (res.error) fail(`${what}: unexpected error ${JSON.stringify(res.error)}`);
  return res.json;
}

/** mustFail returns the error of a call that must fail with the given code. */
function mustFail(res, code, what) {
  if (!res.error) fail(`${what}: succeeded with ${JSON.stringify(res.json)}, want a ${code} error`);
  if (res.error.code !== code) fail(`${what}: error ${JSON.stringify(res.error)}, want code ${code}`);
  return res.error;
}

// ---------------------------------------------------------------------------
// The checks.

const ALL_HOST_FUNCTIONS = [
  'artifact_add', 'config_get', 'http_close', 'http_read', 'http_request', 'log',
  'messages_append', 'messages_get', 'messages_set', 'secret_get', 'session_id',
  'state_get', 'state_set', 'stream',
].sort();

function checkDescriptor(p, { name, tools = [], models = [], state }) {
  const d = p.descriptor;
  check(d && typeof d === 'object', `${p.path}: terrarium_describe returned ${JSON.stringify(d)}`);
  check(d.abi === ABI_VERSION, `${name}: descriptor abi ${d.abi}, want ${ABI_VERSION}`);
  check(d.name === name, `descriptor name ${JSON.stringify(d.name)}, want ${name}`);
  const toolNames = (d.tools ?? []).map((t) => t.name).sort();
  check(sameJSON(toolNames, [...tools].sort()), `${name}: tools ${JSON.stringify(toolNames)}, want ${JSON.stringify(tools)}`);
  for (const t of d.tools ?? []) {
    check(t.inputSchema && typeof t.inputSchema === 'object', `${name}: tool ${t.name} has no input schema`);
  }
  const modelNames = (d.models ?? []).map((m) => m.name).sort();
  check(sameJSON(modelNames, [...models].sort()), `${name}: models ${JSON.stringify(modelNames)}, want ${JSON.stringify(models)}`);
  if (state !== undefined) {
    check(d.capabilities?.state === state, `${name}: capabilities.state ${JSON.stringify(d.capabilities?.state)}, want ${state}`);
  }
  check(sameJSON(p.hostImports, ALL_HOST_FUNCTIONS),
    `${name}: imports ${JSON.stringify(p.hostImports)} from ${HOST_MODULE}, want all of ${JSON.stringify(ALL_HOST_FUNCTIONS)}`);
}

async function main() {
  const paths = process.argv.slice(2);
  if (paths.length === 0) {
    fail('usage: node interop.mjs <plugin.wasm>... (calculator, scratchpad and offline)');
  }
  const started = performance.now();
  const extismVersion = JSON.parse(
    await readFile(new URL('./node_modules/@extism/extism/package.json', import.meta.url), 'utf8'),
  ).version;

  const plugins = {};
  for (const path of paths) {
    const p = await load(path);
    check(typeof p.name === 'string', `${path}: the descriptor has no name`);
    plugins[p.name] = p;
    progress(`loaded ${p.name} from ${path}`);
  }
  for (const want of ['calculator', 'scratchpad', 'offline']) {
    check(plugins[want], `no ${want} plugin among ${JSON.stringify(paths)} (got ${JSON.stringify(Object.keys(plugins))})`);
  }
  const { calculator, scratchpad, offline } = plugins;

  // Descriptors.
  checkDescriptor(calculator, { name: 'calculator', tools: ['calc'] });
  checkDescriptor(scratchpad, { name: 'scratchpad', tools: ['note', 'notes'], state: 'write' });
  checkDescriptor(offline, { name: 'offline', models: ['echo'] });
  progress('descriptors ok');

  // Calculator: a value, then errors (never a trap), then a value again from the same
  // instance.
  const calc = mustOK(await call(calculator, 'terrarium_call_tool', { tool: 'calc', input: { expression: '(1+2)*3' } }), 'calc (1+2)*3');
  check(calc?.output?.value === 9, `calc (1+2)*3: output ${JSON.stringify(calc)}, want value 9`);
  const errors = {
    badExpression: mustFail(await call(calculator, 'terrarium_call_tool', { tool: 'calc', input: { expression: '(1+' } }), 'invalid_input', 'calc "(1+"'),
    divisionByZero: mustFail(await call(calculator, 'terrarium_call_tool', { tool: 'calc', input: { expression: '1/0' } }), 'invalid_input', 'calc "1/0"'),
    garbage: mustFail(await call(calculator, 'terrarium_call_tool', '{"tool": "calc", "inpu'), 'invalid_input', 'calc with truncated JSON'),
    unknownTool: mustFail(await call(calculator, 'terrarium_call_tool', { tool: 'nope', input: {} }), 'not_found', 'unknown tool'),
  };
  const again = mustOK(await call(calculator, 'terrarium_call_tool', { tool: 'calc', input: { expression: '2 * -3.5' } }), 'calc after errors');
  check(again?.output?.value === -7, `calc 2 * -3.5 after errors: output ${JSON.stringify(again)}, want value -7`);
  progress('calculator ok');

  // Scratchpad: the notes go through state_get/state_set into the JS session.
  const n1 = mustOK(await call(scratchpad, 'terrarium_call_tool', { tool: 'note', input: { text: 'first note' } }), 'note 1');
  check(n1?.output?.count === 1, `note 1: output ${JSON.stringify(n1)}, want count 1`);
  const n2 = mustOK(await call(scratchpad, 'terrarium_call_tool', { tool: 'note', input: { text: 'second note' } }), 'note 2');
  check(n2?.output?.count === 2, `note 2: output ${JSON.stringify(n2)}, want count 2`);
  const listed = mustOK(await call(scratchpad, 'terrarium_call_tool', { tool: 'notes', input: {} }), 'notes');
  const wantNotes = ['first note', 'second note'];
  check(sameJSON(listed?.output?.notes, wantNotes), `notes: output ${JSON.stringify(listed)}, want notes ${JSON.stringify(wantNotes)}`);
  check(sameJSON(session.state, { owner: 'js', scratchpad: wantNotes }),
    `the JS session's state is ${JSON.stringify(session.state)}, want {"owner":"js","scratchpad":${JSON.stringify(wantNotes)}}`);
  check((hostCalls.state_get ?? 0) >= 3 && (hostCalls.state_set ?? 0) >= 2,
    `state_get/state_set calls ${hostCalls.state_get}/${hostCalls.state_set}, want at least 3/2`);
  progress('scratchpad ok');

  // Offline model: chunks through the stream host function, then the response.
  const gen = await call(offline, 'terrarium_generate', {
    model: 'echo',
    request: { messages: [{ role: 'user', content: [{ text: 'hello from js' }] }] },
  });
  const resp = mustOK(gen, 'generate echo');
  const text = (resp?.message?.content ?? []).map((p) => p.text ?? '').join('');
  check(text === 'echo: hello from js', `generate: response text ${JSON.stringify(text)}, want "echo: hello from js" (response ${JSON.stringify(resp)})`);
  check(resp?.message?.role === 'model', `generate: message role ${JSON.stringify(resp?.message?.role)}, want model`);
  check(resp?.finishReason === 'stop', `generate: finishReason ${JSON.stringify(resp?.finishReason)}, want stop`);
  check(gen.chunks.length > 1, `generate: ${gen.chunks.length} chunks streamed, want several (word by word)`);
  const streamed = gen.chunks.map((c) => (c?.content ?? []).map((p) => p.text ?? '').join('')).join('');
  check(streamed === text, `generate: the streamed chunks join to ${JSON.stringify(streamed)}, want ${JSON.stringify(text)}`);
  const unknownModel = mustFail(await call(offline, 'terrarium_generate', { model: 'nope', request: { messages: [] } }), 'not_found', 'unknown model');
  progress('offline ok');

  for (const p of Object.values(plugins)) await p.extism.close();

  const summary = {
    ok: true,
    extism: extismVersion,
    node: process.version,
    plugins: Object.fromEntries(Object.values(plugins).map((p) => [p.name, {
      abi: p.descriptor.abi,
      version: p.descriptor.version,
      tools: (p.descriptor.tools ?? []).map((t) => t.name),
      models: (p.descriptor.models ?? []).map((m) => m.name),
    }])),
    calc: calc.output.value,
    errors: Object.fromEntries(Object.entries({ ...errors, unknownModel }).map(([k, e]) => [k, e.code])),
    notes: listed.output.notes,
    state: session.state,
    chunks: gen.chunks.map((c) => (c?.content ?? []).map((p) => p.text ?? '').join('')),
    text,
    hostCalls,
    logs: logs.length,
    ms: Math.round(performance.now() - started),
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
}

main().then(
  () => process.exit(0),
  (e) => {
    const why = e instanceof CheckError ? e.message : e?.stack ?? e;
    process.stderr.write(`interop: FAIL: ${why}\n`);
    process.exit(1);
  },
);
