// A fake Pixie host for testing guests with node's test runner (`node --test`), the twin of
// the Go SDK's sdk.Fake: it loads a built guest module, plays Extism's kernel and Pixie's host
// functions (docs/abi.md), runs the entry point as Pixie's executor does, and reports what the
// guest did. Set the target and the variables, and the answers of the model (ask) and the
// decision engine (judge). It enforces the host's budget: 20 ask/judge calls per run
// ("rate_limited" after that), 262144 bytes per request ("too_large"), 200 host calls (the
// next one traps), and refuses a module that imports what Pixie does not provide.
//
//   import { Fake, boolAnswer } from "@pixie-dev/sdk/fake";
//   const res = await new Fake({ target: '{"command":"rm -rf /"}', vars: { PIXIE_TOOL_NAME: "Bash" },
//     judge: (req) => boolAnswer(req, 0.9) }).run("build/guest.wasm");
//   assert.equal(res.code, 11);

import { readFile } from "node:fs/promises";
import { randomFillSync } from "node:crypto";

export const MAX_HELPER_CALLS = 20;
export const MAX_HELPER_REQUEST_SIZE = 256 * 1024;
export const MAX_HOST_CALLS = 200;
export const MEMORY_PAGES = 512; // Pixie's default cap on a guest's memory (32 MiB)

// The functions of Pixie's host namespace, and the kernel functions a guest may call.
const USER = ["pixie_ask", "pixie_judge", "pixie_log", "pet_context", "pixie_context"];
const KERNEL = ["alloc", "free", "length", "length_unsafe", "load_u8", "load_u64", "store_u8", "store_u64",
  "input_length", "input_load_u8", "input_load_u64", "input_offset", "output_set", "error_set", "config_get",
  "var_get", "var_set", "http_request", "http_status_code", "get_log_level",
  "log_trace", "log_debug", "log_info", "log_warn", "log_error"];

// HostError is a failed ask or judge, with one of the helper's codes ("unavailable",
// "upstream", "timeout", …). An ask or judge function that throws one keeps its code; any
// other error becomes "upstream".
export class HostError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

class Trap extends Error {}
class ProcExit extends Error {
  constructor(code) {
    super(`the guest exited with status ${code}`);
    this.status = code;
  }
}

const enc = new TextEncoder();
const dec = new TextDecoder(); // U+FFFD for invalid UTF-8

function padSpaces(s) {
  const b = enc.encode(s);
  const n = (b.length + 7) & ~7;
  if (n === b.length) return b;
  const p = new Uint8Array(n).fill(0x20);
  p.set(b);
  return p;
}

// Kernel is Extism's kernel memory: blocks allocated at increasing offsets (0 is no block).
class Kernel {
  constructor() {
    this.mem = new Uint8Array(1 << 16);
    this.next = 8;
    this.blocks = new Map();
  }
  alloc(n) {
    n = Number(n);
    const off = this.next;
    this.next = off + ((n + 7) & ~7) + 8;
    if (this.next > this.mem.length) {
      let size = this.mem.length;
      while (size < this.next) size *= 2;
      const m = new Uint8Array(size);
      m.set(this.mem);
      this.mem = m;
    }
    this.mem.fill(0, off, off + n);
    this.blocks.set(off, n);
    return off;
  }
  length(off) {
    return this.blocks.get(Number(off)) ?? 0;
  }
  check(off, n) {
    if (off < 8 || off + n > this.next) throw new Trap(`fake kernel: access of ${n} bytes at ${off} is out of bounds`);
  }
  bytes(off) {
    off = Number(off);
    const n = this.length(off);
    return this.mem.slice(off, off + n);
  }
  write(b) {
    const off = this.alloc(b.length);
    this.mem.set(b, off);
    return off;
  }
}

function encodeContext(target, vars) {
  const t = enc.encode(target);
  const keys = Object.keys(vars).sort((a, b) => (Buffer.compare(Buffer.from(a), Buffer.from(b))));
  const parts = [];
  let size = 12 + 4 + t.length + 4;
  const kv = keys.map((k) => [enc.encode(k), enc.encode(String(vars[k]))]);
  for (const [k, v] of kv) size += 8 + k.length + v.length;
  const b = new Uint8Array((size + 7) & ~7);
  const dv = new DataView(b.buffer);
  b.set(enc.encode("PXCT"), 0);
  dv.setUint32(4, size, true);
  dv.setUint32(8, 1, true);
  let i = 12;
  const field = (f) => {
    dv.setUint32(i, f.length, true);
    b.set(f, i + 4);
    i += 4 + f.length;
  };
  field(t);
  dv.setUint32(i, kv.length, true);
  i += 4;
  for (const [k, v] of kv) {
    field(k);
    field(v);
  }
  parts.push(b);
  return b;
}

// checkImports refuses what Pixie's upload refuses: imports outside WASI, Extism's kernel and
// Pixie's host functions, and an imported memory.
function checkImports(mod, entry) {
  const bad = [];
  for (const imp of WebAssembly.Module.imports(mod)) {
    const ok = imp.kind === "function" && (imp.module === "wasi_snapshot_preview1" ||
      (imp.module === "extism:host/env" && KERNEL.includes(imp.name)) ||
      (imp.module === "extism:host/user" && USER.includes(imp.name)));
    if (!ok) bad.push(`${imp.kind} ${imp.module}.${imp.name}`);
  }
  if (bad.length) throw new Error(`the module imports what the host does not provide: ${bad.join(", ")}`);
  const exp = WebAssembly.Module.exports(mod);
  if (!exp.some((e) => e.name === entry && e.kind === "function")) {
    throw new Error(`the module does not export the entry point "${entry}" (exports: ${exp.map((e) => e.name).join(", ")})`);
  }
}

// Fake runs guests against a fake host. Options (all optional):
//   target      the gate target (a string)
//   vars        the PIXIE_* variables (Extism config), e.g. { PIXIE_TOOL_NAME: "Bash" }
//   ask(req)    answers ask: req is {instruction, input?}; returns the text (or a Promise of
//               it is not supported: answer synchronously); null: every ask is "unavailable"
//   judge(req)  answers judge: req is {state, questions: {id: {type, instructions, criteria}}};
//               returns {answers: {id: Answer}, engine, usage}; null: "unavailable"
//   petContext  what pet_context returns (a JSON string), or null in gate runs
export class Fake {
  constructor(opts = {}) {
    this.target = opts.target ?? "";
    this.vars = opts.vars ?? {};
    this.ask = opts.ask ?? null;
    this.judge = opts.judge ?? null;
    this.petContext = opts.petContext ?? null;
  }

  // run loads the module (bytes, or a path to a .wasm file), prepares an instance as Pixie
  // does (_initialize, then pixie_init when exported, with an empty context), calls entry
  // ("gate" by default, "run" for Pet skills) and returns what the guest did:
  //   code    the entry point's return value (null when it trapped or exited)
  //   output  the output it set, as text ("" for none)
  //   error   the message it reported with error_set (sdk.fail), or ""
  //   trap    the trap's or exit's message, or null
  //   stderr  what it wrote to stdout and stderr (an abort's message goes there)
  //   logs    [{level, message}] of pixie_log
  //   asks, judges   the requests it sent, in order, including refused ones
  //   hostCalls      how many pixie_* calls it made
  //   memoryPages    its linear memory's size after the run, in 64 KiB pages
  async run(wasm, { entry = "gate" } = {}) {
    const bytes = typeof wasm === "string" ? await readFile(wasm) : wasm;
    const mod = await WebAssembly.compile(bytes);
    checkImports(mod, entry);
    const fake = this;
    const res = { code: null, output: "", error: "", trap: null, stderr: "", logs: [], asks: [], judges: [], hostCalls: 0, memoryPages: 0 };
    const k = new Kernel();
    let input = new Uint8Array(0);
    let inRun = false;
    let helperCalls = 0;
    const vars = new Map();
    let memory = null;

    const hostCall = () => {
      if (++res.hostCalls > MAX_HOST_CALLS) throw new Trap(`the run made more than ${MAX_HOST_CALLS} host calls`);
    };
    const result = (fn, reqBytes, serve) => {
      let out;
      try {
        if (reqBytes.length > MAX_HELPER_REQUEST_SIZE) {
          throw new HostError("too_large", `request is ${reqBytes.length} bytes; the limit is ${MAX_HELPER_REQUEST_SIZE}`);
        }
        let req;
        try {
          req = JSON.parse(dec.decode(reqBytes));
        } catch (e) {
          throw new HostError("invalid", `malformed request: ${e.message}`);
        }
        (fn === "pixie_ask" ? res.asks : res.judges).push(req);
        if (helperCalls >= MAX_HELPER_CALLS) throw new HostError("rate_limited", `the run used its ${MAX_HELPER_CALLS} helper calls`);
        helperCalls++;
        out = { ok: serve(req) };
      } catch (e) {
        out = { error: e instanceof HostError ? { code: e.code, message: e.message } : { code: "upstream", message: String(e?.message ?? e) } };
      }
      return BigInt(k.write(padSpaces(JSON.stringify(out))));
    };
    const user = {
      pixie_context() {
        hostCall();
        return BigInt(k.write(inRun ? encodeContext(fake.target, fake.vars) : encodeContext("", {})));
      },
      pixie_ask(off) {
        hostCall();
        return result("pixie_ask", k.bytes(off), (req) => {
          if (!req.instruction) throw new HostError("invalid", "the instruction is empty");
          if (!fake.ask) throw new HostError("unavailable", "no model is configured");
          return { text: String(fake.ask(req)) };
        });
      },
      pixie_judge(off) {
        hostCall();
        return result("pixie_judge", k.bytes(off), (req) => {
          if (!req.questions || Object.keys(req.questions).length === 0) throw new HostError("invalid", "no questions");
          if (!fake.judge) throw new HostError("unavailable", "no decision engine is configured");
          return fake.judge(req);
        });
      },
      pixie_log(off) {
        hostCall();
        try {
          const r = JSON.parse(dec.decode(k.bytes(off)));
          res.logs.push({ level: r.level, message: r.message });
        } catch {
          res.logs.push({ level: "error", message: "malformed log request" });
        }
      },
      pet_context() {
        hostCall();
        if (fake.petContext == null) return 0n;
        return BigInt(k.write(padSpaces(fake.petContext)));
      },
    };
    const kernel = {
      alloc: (n) => BigInt(k.alloc(n)),
      free: (off) => { k.blocks.delete(Number(off)); },
      length: (off) => BigInt(k.length(off)),
      length_unsafe: (off) => BigInt(k.length(off)),
      load_u8: (off) => { off = Number(off); k.check(off, 1); return k.mem[off]; },
      load_u64: (off) => { off = Number(off); k.check(off, 8); return new DataView(k.mem.buffer).getBigUint64(off, true); },
      store_u8: (off, v) => { off = Number(off); k.check(off, 1); k.mem[off] = v; },
      store_u64: (off, v) => { off = Number(off); k.check(off, 8); new DataView(k.mem.buffer).setBigUint64(off, BigInt.asUintN(64, v), true); },
      input_length: () => BigInt(input.length),
      input_load_u8: (i) => input[Number(i)] ?? 0,
      input_load_u64: (i) => { const b = new Uint8Array(8); b.set(input.subarray(Number(i), Number(i) + 8)); return new DataView(b.buffer).getBigUint64(0, true); },
      input_offset: () => BigInt(k.write(input)),
      output_set: (off, n) => { off = Number(off); n = Number(n); res.output = n === 0 ? "" : dec.decode(k.mem.subarray(off, off + n)); },
      error_set: (off) => { res.error = dec.decode(k.bytes(off)); },
      config_get: (off) => {
        const key = dec.decode(k.bytes(off));
        if (!Object.hasOwn(fake.vars, key)) return 0n;
        return BigInt(k.write(enc.encode(String(fake.vars[key]))));
      },
      var_get: (off) => { const v = vars.get(dec.decode(k.bytes(off))); return v ? BigInt(k.write(v)) : 0n; },
      var_set: (off, voff) => { const key = dec.decode(k.bytes(off)); if (voff === 0n) vars.delete(key); else vars.set(key, k.bytes(voff)); },
      http_request: () => { throw new Trap("http_request is denied: a guest has no network"); },
      http_status_code: () => 0,
      get_log_level: () => 0,
    };
    for (const level of ["trace", "debug", "info", "warn", "error"]) {
      kernel["log_" + level] = (off) => { res.stderr += `extism ${level}: ${dec.decode(k.bytes(off))}\n`; };
    }
    const view = () => new DataView(memory.buffer);
    const wasi = {
      fd_write(fd, iovs, n, written) {
        let total = 0;
        for (let i = 0; i < n; i++) {
          const p = view().getUint32(iovs + i * 8, true);
          const len = view().getUint32(iovs + i * 8 + 4, true);
          if (fd === 1 || fd === 2) res.stderr += dec.decode(new Uint8Array(memory.buffer, p, len));
          total += len;
        }
        view().setUint32(written, total, true);
        return fd === 1 || fd === 2 ? 0 : 8;
      },
      proc_exit(code) { throw new ProcExit(code); },
      random_get(p, n) { randomFillSync(new Uint8Array(memory.buffer, p, n)); return 0; },
      clock_time_get(id, precision, p) { view().setBigUint64(p, BigInt(Date.now()) * 1000000n, true); return 0; },
      args_sizes_get(argc, size) { view().setUint32(argc, 0, true); view().setUint32(size, 0, true); return 0; },
      args_get() { return 0; },
      environ_sizes_get(count, size) { view().setUint32(count, 1, true); view().setUint32(size, 10, true); return 0; },
      environ_get(env, buf) { view().setUint32(env, buf, true); new Uint8Array(memory.buffer, buf, 10).set(enc.encode("PWD=/work\0")); return 0; },
    };
    const imports = { "wasi_snapshot_preview1": {}, "extism:host/env": {}, "extism:host/user": {} };
    for (const imp of WebAssembly.Module.imports(mod)) {
      const table = { "wasi_snapshot_preview1": wasi, "extism:host/env": kernel, "extism:host/user": user }[imp.module];
      imports[imp.module][imp.name] = table[imp.name] ?? (() => (imp.module === "wasi_snapshot_preview1" ? 52 : (() => { throw new Trap(`the fake does not implement ${imp.module}.${imp.name}`); })()));
    }
    const inst = await WebAssembly.instantiate(mod, imports);
    memory = inst.exports.memory;
    const call = (name) => {
      try {
        return { code: inst.exports[name]() };
      } catch (e) {
        if (e instanceof ProcExit || e instanceof Trap || e instanceof WebAssembly.RuntimeError || e instanceof RangeError) {
          return { trap: e.message };
        }
        throw e;
      }
    };
    if (inst.exports._initialize) {
      const r = call("_initialize");
      if (r.trap) throw new Error(`the module's _initialize failed: ${r.trap}\n${res.stderr}`);
    }
    if (inst.exports.pixie_init) {
      const r = call("pixie_init");
      if (r.trap) throw new Error(`the module's pixie_init failed: ${r.trap}\n${res.stderr}`);
    }
    res.hostCalls = 0;
    res.output = "";
    res.error = "";
    input = enc.encode(this.target);
    inRun = true;
    const r = call(entry);
    if (r.trap !== undefined) res.trap = r.trap;
    else res.code = r.code;
    res.memoryPages = memory.buffer.byteLength / 65536;
    return res;
  }
}

function confidence(p) {
  return p < 0.5 ? 1 - p : p;
}

function answerAll(req, a) {
  const answers = {};
  for (const id of Object.keys(req.questions ?? {})) answers[id] = a;
  return { answers, engine: "llm", usage: { inputTokens: 0, outputTokens: 0 } };
}

// boolAnswer builds the judge response of a bool question with the given "yes" probability.
export function boolAnswer(req, yes) {
  return answerAll(req, { type: "noul", label: yes >= 0.5 ? "yes" : "no", yes,
    probabilities: { no: 1 - yes, yes }, confidence: confidence(yes) });
}

// selectAnswer builds the judge response choosing option with probability p.
export function selectAnswer(req, option, p) {
  return answerAll(req, { type: "choice", label: option, probabilities: { [option]: p }, confidence: p });
}

// scoreAnswer builds the judge response placing the state at level (a number from 0) with
// probability p.
export function scoreAnswer(req, level, p) {
  return answerAll(req, { type: "score", label: String(Math.round(level)), score: level,
    probabilities: { [String(Math.round(level))]: p }, confidence: p });
}
