// The AssemblyScript SDK for Pixie rule guests, the twin of the Go SDK
// (github.com/pixie-dev/pixie/sdk): the same run contract, on the same ABI (docs/abi.md),
// written on Extism's kernel and Pixie's host functions alone.
//
// A guest's entry file exports the gate entry point and hands it a rule:
//
//   import * as sdk from "@pixie-dev/sdk";
//   export { pixie_init, abort } from "@pixie-dev/sdk";
//
//   export function gate(): i32 {
//     return sdk.run(rule);
//   }
//
//   function rule(): i32 {
//     if (sdk.toolName() != "grep") return sdk.skip();
//     return sdk.continueWith(sdk.target());
//   }
//
// AssemblyScript has no exceptions to catch: a failed helper call is an error value on its
// result (`.error`), and an abort (a thrown Error, an index out of bounds) traps, which is a
// run error: the gate's error policy applies, and the message is on the run's stderr.

import * as env from "./env";
import { Context, fetch } from "./context";
import { readFree, writeExact, writePadded } from "./memory";
import { Value, Writer, parse, parseAt, NUMBER, OBJECT, STRING } from "./json";
import { decode, encode } from "./utf8";

// Exit codes returned by the finishing functions (the run contract).
export const EXIT_CONTINUE: i32 = 0; // continueWith, continueData
export const EXIT_SKIP: i32 = 10; // skip
export const EXIT_CONCLUDE: i32 = 11; // conclude
export const EXIT_ERROR: i32 = 1; // fail: the gate's error policy applies

// Verdicts of a gate output.
export const PASS = "pass";
export const STOP = "stop";

// Variable names of the run contract (Extism config keys).
export const VAR_POINT = "PIXIE_POINT";
export const VAR_TOOL_NAME = "PIXIE_TOOL_NAME";
export const VAR_TOOL_ARGS = "PIXIE_TOOL_ARGS";
export const VAR_AGENT = "PIXIE_AGENT";
export const VAR_SESSION_ID = "PIXIE_SESSION_ID";
export const VAR_TURN = "PIXIE_TURN";
export const VAR_GATE_NAME = "PIXIE_GATE_NAME";

// Limits the host enforces on ask and judge (docs/abi.md, "Limits").
export const MAX_HELPER_CALLS = 20;
export const MAX_HELPER_REQUEST_SIZE = 256 * 1024;

// The run's state: the context, fetched on first use, and the output block of this call.
let ctx: Context | null = null;
let outputSet = false;

function current(): Context {
  let c = ctx;
  if (c == null) {
    c = fetch();
    ctx = c;
  }
  return c;
}

// --- context ---

// target returns the gate target: the instruction, message, tool arguments JSON, tool result
// or final answer the gate checks.
export function target(): string {
  return current().targetString();
}

// targetBytes returns the target's UTF-8 bytes as the host sent them (no copy: do not change
// them).
export function targetBytes(): Uint8Array {
  return current().target;
}

// config returns the Extism config value of key (the PIXIE_* variables), or null when it is
// not set.
export function config(key: string): string | null {
  const v = current().lookup(key);
  if (v != null || key.startsWith("PIXIE_")) return v;
  // Not in the context: a host may set config beyond it.
  const k = encode(key);
  const koff = writeExact(k.dataStart, k.length);
  const voff = env.config_get(koff);
  env.free(koff);
  if (voff == 0) return null;
  const b = readFree(voff);
  return decode(b.dataStart, b.length);
}

function configString(key: string): string {
  const v = config(key);
  return v == null ? "" : v;
}

// point returns the gate point: user-message, agent-message, tool-before, tool-after or
// turn-end.
export function point(): string {
  return configString(VAR_POINT);
}

// toolName returns the tool name at tool points, and "" elsewhere.
export function toolName(): string {
  return configString(VAR_TOOL_NAME);
}

// toolArgs returns the tool arguments JSON at tool points, and "" elsewhere.
export function toolArgs(): string {
  return configString(VAR_TOOL_ARGS);
}

// agent returns "root" or "child".
export function agent(): string {
  return configString(VAR_AGENT);
}

// sessionId returns the session id.
export function sessionId(): string {
  return configString(VAR_SESSION_ID);
}

// gateName returns the name of the gate running the rule.
export function gateName(): string {
  return configString(VAR_GATE_NAME);
}

// turn returns the turn number, or 0 when the host did not set one (or it is not a number).
export function turn(): i32 {
  const s = configString(VAR_TURN);
  if (s.length == 0 || s.length > 10) return 0;
  let n: i64 = 0;
  let i = 0;
  const neg = s.charCodeAt(0) == 0x2d || s.charCodeAt(0) == 0x2b;
  if (neg) i = 1;
  if (i == s.length) return 0;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return 0;
    n = n * 10 + <i64>(c - 0x30);
  }
  if (s.charCodeAt(0) == 0x2d) n = -n;
  if (n > <i64>i32.MAX_VALUE || n < <i64>i32.MIN_VALUE) return 0;
  return <i32>n;
}

// petContext returns the invocation snapshot JSON of a Pet skill run, or null in gate runs.
export function petContext(): string | null {
  const off = env.pet_context();
  if (off == 0) return null;
  const b = readFree(off);
  let n = b.length;
  while (n > 0 && b[n - 1] == 0x20) n--; // the host's padding
  return decode(b.dataStart, n);
}

// log writes one line into the run record. Levels are debug, info, warn and error; the host
// caps lines (docs/abi.md), dropping what is over.
export function log(level: string, message: string): void {
  const w = new Writer();
  w.byte(0x7b).field("level", true).str(level).field("message", false).str(message).byte(0x7d);
  const off = writePadded(w.buf.dataStart, w.len, 0x20);
  env.pixie_log(off);
  env.free(off);
}

// --- finishing ---

function setOutput(p: usize, n: i32): void {
  if (n == 0) {
    if (outputSet) env.output_set(0, 0); // an earlier output of this call: clear it
    return;
  }
  const off = writePadded(p, n, 0);
  env.output_set(off, <u64>n);
  outputSet = true;
}

// continueWith finishes the run with exit code 0: the gate's Pixie task runs, and text is
// {{hooks.<name>.text}}. (The Go SDK's Continue: `continue` is a keyword here.)
export function continueWith(text: string): i32 {
  const b = encode(text);
  setOutput(b.dataStart, b.length);
  return EXIT_CONTINUE;
}

// continueData is continueWith with JSON text; when it is an object it is also
// {{hooks.<name>.data}}. Text that is not JSON finishes the run with fail.
export function continueData(json: string): i32 {
  const b = encode(json);
  if (parse(b) == null) return fail("sdk: continueData: the text is not JSON");
  setOutput(b.dataStart, b.length);
  return EXIT_CONTINUE;
}

// skip finishes the run with exit code 10: the gate is skipped and the original flow goes on
// without a model call.
export function skip(): i32 {
  setOutput(0, 0);
  return EXIT_SKIP;
}

// Output is the gate output a rule concludes with: every field is optional, and without a
// verdict the gate passes.
export class Output {
  verdict: string = ""; // PASS or STOP
  reason: string = "";
  replace: string = "";
  append: string = "";
  note: string = "";

  // stop is an output with the verdict STOP and reason.
  static stop(reason: string): Output {
    const o = new Output();
    o.verdict = STOP;
    o.reason = reason;
    return o;
  }

  // pass is an output with the verdict PASS and note.
  static pass(note: string): Output {
    const o = new Output();
    o.verdict = PASS;
    o.note = note;
    return o;
  }

  // toJSON renders the output exactly as the Go SDK (encoding/json) does: empty fields left
  // out, in the order verdict, reason, replace, append, note.
  toJSON(): string {
    return this.write(new Writer()).toString();
  }

  write(w: Writer): Writer {
    w.byte(0x7b);
    let first = true;
    if (this.verdict.length > 0) { w.field("verdict", first).str(this.verdict); first = false; }
    if (this.reason.length > 0) { w.field("reason", first).str(this.reason); first = false; }
    if (this.replace.length > 0) { w.field("replace", first).str(this.replace); first = false; }
    if (this.append.length > 0) { w.field("append", first).str(this.append); first = false; }
    if (this.note.length > 0) { w.field("note", first).str(this.note); first = false; }
    return w.byte(0x7d);
  }
}

// conclude finishes the run with exit code 11: out is the gate output and no model is called.
// A verdict other than "", PASS or STOP finishes the run with fail instead.
export function conclude(out: Output): i32 {
  if (out.verdict.length > 0 && out.verdict != PASS && out.verdict != STOP) {
    return fail("sdk: verdict \"" + out.verdict + "\" is neither \"pass\" nor \"stop\"");
  }
  const w = out.write(new Writer());
  setOutput(w.buf.dataStart, w.len);
  return EXIT_CONCLUDE;
}

// fail finishes the run as an error (exit code 1): the gate's error policy applies and message
// is recorded.
export function fail(message: string): i32 {
  if (message.length == 0) message = "rule failed";
  const b = encode(message);
  const off = writeExact(b.dataStart, b.length);
  env.error_set(off);
  return EXIT_ERROR;
}

// run calls rule and returns its exit code, with the SDK's state reset first: whatever a
// previous call on this instance left (none with Pixie's executor, which gives each run a
// fresh instance) is not seen by this one.
export function run(rule: () => i32): i32 {
  ctx = null;
  outputSet = false;
  return rule();
}

// --- JSON ---

// JSONValue is a parsed JSON value: kind is one of the JSON_* kinds; str, num (and raw, its
// text), bool, items (array elements or object values) and keys (object keys) hold it; get,
// getString and getNumber read an object's members (the last of repeated keys, as Go and jq).
export { Value as JSONValue } from "./json";
export const JSON_NULL = 0;
export const JSON_BOOL = 1;
export const JSON_NUMBER = 2;
export const JSON_STRING = 3;
export const JSON_ARRAY = 4;
export const JSON_OBJECT = 5;

// parseJSON parses text as one JSON value (the tool arguments of a tool point, say), or
// returns null when it is not JSON. Strings decode as Go's encoding/json decodes them.
export function parseJSON(text: string): Value | null {
  return parse(encode(text));
}

// parseJSONBytes is parseJSON of UTF-8 bytes (targetBytes(), without a copy to a string).
export function parseJSONBytes(b: Uint8Array): Value | null {
  return parse(b);
}

// --- the model and the decision engine ---

// HostError is a failed ask or judge call, with the same codes as the HTTP helper:
// "rate_limited" past MAX_HELPER_CALLS calls in a run, "too_large" past
// MAX_HELPER_REQUEST_SIZE bytes, "unavailable" when no model or engine is configured,
// "timeout", "upstream", "invalid", "internal".
export class HostError {
  constructor(public fn: string, public code: string, public message: string) {}

  toString(): string {
    return this.fn + ": " + this.code + ": " + this.message;
  }
}

const FN_ASK = "pixie_ask";
const FN_JUDGE = "pixie_judge";

// HostReply is a helper call's decoded answer: the ok payload, or the error.
class HostReply {
  ok: Value | null = null;
  error: HostError | null = null;
}

function call(fn: string, req: Writer): HostReply {
  const reply = new HostReply();
  if (req.len > MAX_HELPER_REQUEST_SIZE) {
    reply.error = new HostError(fn, "too_large", "request is " + req.len.toString() + " bytes; the limit is " + MAX_HELPER_REQUEST_SIZE.toString());
    return reply;
  }
  const off = writePadded(req.buf.dataStart, req.len, 0x20);
  const res = fn == FN_ASK ? env.pixie_ask(off) : env.pixie_judge(off);
  env.free(off);
  const b = readFree(res);
  const v = parseAt(b.dataStart, b.length);
  if (v == null || v.kind != OBJECT) {
    reply.error = new HostError(fn, "internal", "malformed host result");
    return reply;
  }
  const e = v.get("error");
  if (e != null && e.kind == OBJECT) {
    reply.error = new HostError(fn, e.getString("code"), e.getString("message"));
    return reply;
  }
  const ok = v.get("ok");
  if (ok == null || ok.kind != OBJECT) {
    reply.error = new HostError(fn, "internal", "malformed host answer");
    return reply;
  }
  reply.ok = ok;
  return reply;
}

// AskResult is the answer of ask: text, or error.
export class AskResult {
  text: string = "";
  error: HostError | null = null;
}

// ask asks the Pixie model to apply instruction to input, and returns its answer. It is the
// WASM form of `pixie ask "<instruction>" --input`; pass target() as input to work on the gate
// target. Calls count against the run's budget; a failure is result.error.
export function ask(instruction: string, input: string): AskResult {
  const w = new Writer();
  w.byte(0x7b).field("instruction", true).str(instruction);
  if (input.length > 0) w.field("input", false).str(input);
  w.byte(0x7d);
  const res = new AskResult();
  const reply = call(FN_ASK, w);
  if (reply.error != null) {
    res.error = reply.error;
    return res;
  }
  const t = reply.ok!.get("text");
  if (t == null || t.kind != STRING) {
    res.error = new HostError(FN_ASK, "internal", "malformed host answer: no text");
    return res;
  }
  res.text = t.str;
  return res;
}

// Usage is token usage.
export class Usage {
  inputTokens: i64 = 0;
  outputTokens: i64 = 0;
}

// Answer is the decision engine's answer to one question: its label, the probability of every
// valid answer (keys sorted, each with the number's text as the host wrote it), and a
// confidence in [0,1].
export class Answer {
  type: string = "";
  label: string = "";
  keys: Array<string> = [];
  values: Array<f64> = [];
  raws: Array<string> = [];
  // yes and score are NaN when the answer has none (yes: bool; score: score).
  yes: f64 = NaN;
  yesRaw: string = "";
  score: f64 = NaN;
  scoreRaw: string = "";
  confidence: f64 = 0;
  confidenceRaw: string = "0";

  // probability returns the probability of the answer key, or 0.
  probability(key: string): f64 {
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] == key) return this.values[i];
    return 0;
  }
}

// Judgment is the common part of a judge result.
export class Judgment {
  // type is the command-line type: "bool", "select" or "score".
  type: string = "";
  // label is "yes"/"no" (bool), the option name (select) or the nearest level number (score).
  label: string = "";
  answer: Answer = new Answer();
  // engine is "llm" or "jev".
  engine: string = "";
  usage: Usage = new Usage();
  error: HostError | null = null;

  // json renders the judgment exactly as the one line `pixie judge --json` prints it (and as
  // the Go SDK's Judgment.JSON): {"type","label","answer","engine"}, where answer holds the
  // probabilities and the confidence (and "yes" for bool, "score" for score).
  json(): string {
    const w = new Writer();
    w.byte(0x7b).field("type", true).str(this.type).field("label", false).str(this.label);
    w.field("answer", false).byte(0x7b).field("probabilities", true).byte(0x7b);
    const a = this.answer;
    for (let i = 0; i < a.keys.length; i++) w.field(a.keys[i], i == 0).raw(a.raws[i]);
    w.byte(0x7d).field("confidence", false).raw(a.confidenceRaw);
    if (this.type == "bool" && a.yesRaw.length > 0) w.field("yes", false).raw(a.yesRaw);
    if (this.type == "score" && a.scoreRaw.length > 0) w.field("score", false).raw(a.scoreRaw);
    w.byte(0x7d).field("engine", false).str(this.engine).byte(0x7d);
    return w.toString();
  }
}

// BoolResult is a bool judgment.
export class BoolResult extends Judgment {
  // yes is the "yes" probability.
  yes: f64 = 0;
  // pass reports yes >= the threshold (default 0.5): exit 0 of `pixie judge`.
  pass: bool = false;
}

// SelectResult is a select judgment; label is the chosen option.
export class SelectResult extends Judgment {}

// ScoreResult is a score judgment.
export class ScoreResult extends Judgment {
  // score is the probability-weighted level, from 0 (may be fractional).
  score: f64 = 0;
}

// BoolOptions configure judgeBool: the threshold (`--threshold`, default 0.5) and what yes and
// no mean (`--true`, `--false`).
export class BoolOptions {
  threshold: f64 = 0.5;
  trueMeans: string = "";
  falseMeans: string = "";
}

// Option is one option of a select judgment.
export class Option {
  constructor(public name: string, public description: string = "") {}
}

const QUESTION_ID = "q";

// judge sends one question; criteria writes the criteria object's members.
function judge(j: Judgment, wireType: string, question: string, state: string, crit: Writer): void {
  if (question.length == 0) {
    j.error = new HostError(FN_JUDGE, "invalid", "the question is empty");
    return;
  }
  const w = new Writer();
  w.byte(0x7b).field("state", true).str(state).field("questions", false).byte(0x7b);
  w.field(QUESTION_ID, true).byte(0x7b).field("type", true).str(wireType);
  w.field("instructions", false).str(question).field("criteria", false);
  const cb = crit.bytes();
  for (let i = 0; i < cb.length; i++) w.byte(cb[i]);
  w.byte(0x7d).byte(0x7d).byte(0x7d);
  const reply = call(FN_JUDGE, w);
  if (reply.error != null) {
    j.error = reply.error;
    return;
  }
  const ok = reply.ok!;
  const answers = ok.get("answers");
  let a: Value | null = null;
  if (answers != null) a = answers.get(QUESTION_ID);
  if (a == null || a.kind != OBJECT) {
    j.error = new HostError(FN_JUDGE, "internal", "the answer is missing");
    return;
  }
  j.engine = ok.getString("engine");
  const u = ok.get("usage");
  if (u != null) {
    const it = u.getNumber("inputTokens");
    const ot = u.getNumber("outputTokens");
    if (!isNaN(it)) j.usage.inputTokens = <i64>it;
    if (!isNaN(ot)) j.usage.outputTokens = <i64>ot;
  }
  const ans = j.answer;
  ans.type = a.getString("type");
  ans.label = a.getString("label");
  j.label = ans.label;
  const probs = a.get("probabilities");
  if (probs != null && probs.kind == OBJECT) {
    // Sorted by key, as Go writes a map; a repeated key keeps its last value.
    const order = new Array<i32>();
    for (let i = 0; i < probs.keys.length; i++) {
      if (probs.items[i].kind != NUMBER) continue;
      let dup = -1;
      for (let k = 0; k < order.length; k++) if (probs.keys[order[k]] == probs.keys[i]) dup = k;
      if (dup >= 0) order[dup] = i;
      else order.push(i);
    }
    for (let x = 1; x < order.length; x++) {
      const v = order[x];
      let y = x - 1;
      while (y >= 0 && probs.keys[order[y]] > probs.keys[v]) {
        order[y + 1] = order[y];
        y--;
      }
      order[y + 1] = v;
    }
    for (let k = 0; k < order.length; k++) {
      const item = probs.items[order[k]];
      ans.keys.push(probs.keys[order[k]]);
      ans.values.push(item.num);
      ans.raws.push(item.raw);
    }
  }
  const yes = a.get("yes");
  if (yes != null && yes.kind == NUMBER) {
    ans.yes = yes.num;
    ans.yesRaw = yes.raw;
  }
  const score = a.get("score");
  if (score != null && score.kind == NUMBER) {
    ans.score = score.num;
    ans.scoreRaw = score.raw;
  }
  const conf = a.get("confidence");
  if (conf != null && conf.kind == NUMBER) {
    ans.confidence = conf.num;
    ans.confidenceRaw = conf.raw;
  }
}

// judgeBool asks the decision engine a yes/no question about state
// (`pixie judge --type bool`). A judgment error stays an error (result.error): it never
// becomes "no".
export function judgeBool(question: string, state: string, opts: BoolOptions | null = null): BoolResult {
  const o = opts == null ? new BoolOptions() : opts;
  const r = new BoolResult();
  r.type = "bool";
  if (!(o.threshold >= 0 && o.threshold <= 1)) {
    r.error = new HostError(FN_JUDGE, "invalid", "threshold " + o.threshold.toString() + " is outside [0,1]");
    return r;
  }
  const c = new Writer();
  c.byte(0x7b);
  let first = true;
  if (o.trueMeans.length > 0) { c.field("true", first).str(o.trueMeans); first = false; }
  if (o.falseMeans.length > 0) { c.field("false", first).str(o.falseMeans); first = false; }
  c.byte(0x7d);
  judge(r, "noul", question, state, c);
  if (r.error != null) return r;
  r.yes = isNaN(r.answer.yes) ? r.answer.probability("yes") : r.answer.yes;
  r.pass = r.yes >= o.threshold;
  return r;
}

// judgeSelect asks the decision engine to choose one of two or more options for state
// (`pixie judge --type select --option name="description" …`).
export function judgeSelect(question: string, state: string, options: Array<Option>): SelectResult {
  const r = new SelectResult();
  r.type = "select";
  if (options.length < 2) {
    r.error = new HostError(FN_JUDGE, "invalid", "select needs two or more options, got " + options.length.toString());
    return r;
  }
  const c = new Writer();
  c.byte(0x7b).field("options", true).byte(0x5b);
  for (let i = 0; i < options.length; i++) {
    if (i > 0) c.byte(0x2c);
    c.byte(0x7b).field("name", true).str(options[i].name);
    if (options[i].description.length > 0) c.field("description", false).str(options[i].description);
    c.byte(0x7d);
  }
  c.byte(0x5d).byte(0x7d);
  judge(r, "choice", question, state, c);
  return r;
}

// judgeScore asks the decision engine to place state on a scale of 2-10 levels, lowest first
// (`pixie judge --type score --level "…" …`).
export function judgeScore(question: string, state: string, levels: Array<string>): ScoreResult {
  const r = new ScoreResult();
  r.type = "score";
  if (levels.length < 2 || levels.length > 10) {
    r.error = new HostError(FN_JUDGE, "invalid", "score needs 2 to 10 levels, got " + levels.length.toString());
    return r;
  }
  const c = new Writer();
  c.byte(0x7b).field("levels", true).byte(0x5b);
  for (let i = 0; i < levels.length; i++) {
    if (i > 0) c.byte(0x2c);
    c.str(levels[i]);
  }
  c.byte(0x5d).byte(0x7d);
  judge(r, "score", question, state, c);
  if (r.error != null) return r;
  if (!isNaN(r.answer.score)) r.score = r.answer.score;
  else {
    const n = parseFloat(r.label);
    r.score = isNaN(n) ? 0 : n;
  }
  return r;
}

// --- module exports a guest re-exports from its entry file ---

// pixie_init is the optional export the host calls once when it prepares an instance (before
// the run it will serve is known), so that the module's start code (_initialize) runs then and
// not on the run's path. Re-export it: `export { pixie_init } from "@pixie-dev/sdk"`.
export function pixie_init(): i32 {
  return 0;
}

// abort replaces AssemblyScript's default abort (an import of env.abort, which Pixie does not
// provide): it writes the message to stderr, which the run record keeps, and traps. Build with
// `--use abort=<this module>/abort` (pixie guest build does).
export function abort(message: string | null, fileName: string | null = null, line: u32 = 0, column: u32 = 0): void {
  let text = "abort: " + (message == null ? "(no message)" : message);
  if (fileName != null) text += " at " + fileName + ":" + line.toString() + ":" + column.toString();
  text += "\n";
  const b = encode(text);
  // One iovec {buf, len} in the guest's memory, and the count written.
  const iov = new StaticArray<u32>(3);
  const p = changetype<usize>(iov);
  store<u32>(p, <u32>b.dataStart);
  store<u32>(p, <u32>b.length, 4);
  env.fd_write(2, p, 1, p + 8);
  unreachable();
}
