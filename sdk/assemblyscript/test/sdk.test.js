// The SDK's tests: every function of assembly/index.ts, built into test/fixtures/rules.ts's
// module and run through the fake host (fake/index.js), which these tests check too.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Fake, HostError, boolAnswer, selectAnswer, scoreAnswer, MAX_HELPER_CALLS } from "../fake/index.js";
import { build } from "./build.js";

let wasm;
before(() => {
  wasm = readFileSync(build("test/fixtures/rules.ts"));
});

const run = (entry, opts = {}) => new Fake(opts).run(wasm, { entry });

test("finishing", async (t) => {
  const cases = [
    ["continue_text", { target: "t" }, 0, "seen: t", ""],
    ["continue_data", {}, 0, '{"n":1,"s":"é"}', ""],
    ["continue_bad_data", {}, 1, "", "sdk: continueData: the text is not JSON"],
    ["skip", {}, 10, "", ""],
    ["output_then_skip", {}, 10, "", ""],
    ["conclude", {}, 11, '{"verdict":"stop","reason":"no \\u003crm\\u003e \\u0026 \\"quotes\\"\\n\\u2028 ü 😀","note":"n"}', ""],
    ["conclude_empty", {}, 11, "{}", ""],
    ["conclude_bad_verdict", {}, 1, "", 'sdk: verdict "maybe" is neither "pass" nor "stop"'],
    ["fail", {}, 1, "", "boom"],
    ["fail_empty", {}, 1, "", "rule failed"],
  ];
  for (const [entry, opts, code, output, error] of cases) {
    await t.test(entry, async () => {
      const res = await run(entry, opts);
      assert.equal(res.trap, null, res.stderr);
      assert.deepEqual([res.code, res.output, res.error], [code, output, error]);
    });
  }
});

test("the gate output is what encoding/json writes", async () => {
  // The Go SDK's Conclude writes the same bytes; JSON.parse reads them back.
  const res = await run("conclude");
  assert.deepEqual(JSON.parse(res.output), { verdict: "stop", reason: 'no <rm> & "quotes"\n\u2028 ü 😀', note: "n" });
});

test("context", async () => {
  const vars = { PIXIE_POINT: "tool-before", PIXIE_TOOL_NAME: "Bash", PIXIE_TOOL_ARGS: "{}", PIXIE_AGENT: "root",
    PIXIE_SESSION_ID: "s", PIXIE_TURN: "7", PIXIE_GATE_NAME: "g", OTHER: "o" };
  const res = await run("context", { target: "größe ☃", vars });
  assert.equal(res.trap, null, res.stderr);
  assert.equal(res.output, ["größe ☃", "tool-before", "Bash", "{}", "root", "s", "g", "7", "o", "(null)", "(null)", "11"].join("\n"));
  // One pixie_context call: the whole context in one block.
  assert.equal(res.hostCalls, 1);
});

test("context outside a tool point", async () => {
  const res = await run("context", { target: "" });
  assert.equal(res.output, ["", "", "", "", "", "", "", "0", "(null)", "(null)", "(null)", "0"].join("\n"));
});

test("invalid UTF-8 in the target decodes as Go does", async () => {
  const res = await run("continue_text", { target: "a\udc00b" }); // TextEncoder writes U+FFFD
  assert.equal(res.output, "seen: a\ufffdb");
});

test("turn", async (t) => {
  for (const [v, want] of [["12", "12"], ["-3", "-3"], ["x", "0"], ["", "0"], ["99999999999", "0"], ["1.5", "0"]]) {
    await t.test(JSON.stringify(v), async () => {
      assert.equal((await run("turn", { vars: { PIXIE_TURN: v } })).output, want);
    });
  }
});

test("pet context", async () => {
  assert.equal((await run("pet", { petContext: '{"seq":1}' })).output, '{"seq":1}');
  const none = await run("pet");
  assert.deepEqual([none.code, none.error], [1, "no pet_context"]);
});

test("log", async () => {
  const res = await run("log");
  assert.deepEqual(res.logs, [{ level: "warn", message: 'careful: "x"' }, { level: "info", message: "second" }]);
});

test("ask", async () => {
  const res = await run("ask", { target: "hello", ask: (req) => req.input.toUpperCase() });
  assert.equal(res.output, "HELLO");
  assert.deepEqual(res.asks, [{ instruction: "Shout it.", input: "hello" }]);
});

test("ask without input sends none", async () => {
  const res = await run("ask_target", { target: "long text", ask: (req) => `input=${req.input ?? "(none)"}` });
  assert.equal(res.output, "input=(none)");
});

test("ask errors", async (t) => {
  await t.test("no model", async () => {
    const res = await run("ask", { target: "x" });
    assert.deepEqual([res.code, res.error], [1, "pixie_ask: unavailable: no model is configured"]);
  });
  await t.test("a host error keeps its code", async () => {
    const res = await run("ask", { target: "x", ask: () => { throw new HostError("timeout", "too slow"); } });
    assert.equal(res.error, "pixie_ask: timeout: too slow");
  });
  await t.test("any other error is upstream", async () => {
    const res = await run("ask", { target: "x", ask: () => { throw new Error("503"); } });
    assert.equal(res.error, "pixie_ask: upstream: 503");
  });
  await t.test("the 21st call is rate limited", async () => {
    const res = await run("ask_budget", { ask: () => "ok" });
    const codes = res.output.split(",");
    assert.equal(codes.length, MAX_HELPER_CALLS + 1);
    assert.deepEqual(codes.slice(0, MAX_HELPER_CALLS), Array(MAX_HELPER_CALLS).fill("ok"));
    assert.equal(codes[MAX_HELPER_CALLS], "rate_limited");
  });
  await t.test("too large", async () => {
    const res = await run("ask_too_large", { ask: () => "ok" });
    assert.equal(res.output, "too_large");
    assert.equal(res.asks.length, 0, "refused in the guest, before the host call");
  });
});

test("judge bool", async () => {
  const res = await run("judge_bool", { target: "Bonjour", judge: (req) => boolAnswer(req, 0.9) });
  assert.equal(res.trap, null, res.stderr);
  const [head, json] = res.output.split("\n");
  assert.equal(head, "true 0.9 yes");
  // The line `pixie judge --json` prints, as the Go SDK's Judgment.JSON renders it.
  assert.equal(json, '{"type":"bool","label":"yes","answer":{"probabilities":{"no":0.09999999999999998,"yes":0.9},"confidence":0.9,"yes":0.9},"engine":"llm"}');
  assert.deepEqual(res.judges, [{ state: "Bonjour", questions: { q: { type: "noul", instructions: "Is this French?", criteria: { true: "French" } } } }]);
});

test("judge bool threshold", async () => {
  const below = await run("judge_bool", { target: "x", judge: (req) => boolAnswer(req, 0.7) });
  assert.match(below.output, /^false 0.7 yes\n/);
  assert.equal((await run("judge_bool_default", { judge: (req) => boolAnswer(req, 0.5) })).output, "pass");
  assert.equal((await run("judge_bool_default", { judge: (req) => boolAnswer(req, 0.49) })).output, "no");
  // Without "yes", the probability of "yes" counts.
  const noYes = (req) => ({ answers: { q: { type: "noul", label: "yes", probabilities: { yes: 0.6, no: 0.4 }, confidence: 0.6 } }, engine: "jev" });
  assert.equal((await run("judge_bool_default", { judge: noYes })).output, "pass");
});

test("judge argument errors", async () => {
  assert.equal((await run("judge_bad_threshold")).output, "invalid: threshold 1.5 is outside [0,1]");
  assert.equal((await run("judge_empty_question")).output, "invalid");
  assert.equal((await run("judge_select_one")).output, "invalid: select needs two or more options, got 1");
  assert.equal((await run("judge_score_levels")).output, "invalid");
});

test("judge select", async () => {
  const res = await run("judge_select", { target: "s", judge: (req) => selectAnswer(req, "b", 0.75) });
  assert.equal(res.output, 'b\n{"type":"select","label":"b","answer":{"probabilities":{"b":0.75},"confidence":0.75},"engine":"llm"}');
  assert.deepEqual(res.judges[0].questions.q, { type: "choice", instructions: "Which?", criteria: { options: [{ name: "a", description: "the first" }, { name: "b" }] } });
});

test("judge select probabilities sorted by key", async () => {
  const judge = () => ({ answers: { q: { type: "choice", label: "missing", probabilities: { supported: 0.35, contradicted: 0.25, missing: 0.4 }, confidence: 0.016461 } }, engine: "llm" });
  const res = await run("judge_select", { target: "s", judge });
  assert.equal(res.output.split("\n")[1], '{"type":"select","label":"missing","answer":{"probabilities":{"contradicted":0.25,"missing":0.4,"supported":0.35},"confidence":0.016461},"engine":"llm"}');
});

test("judge score", async () => {
  const res = await run("judge_score", { target: "s", judge: (req) => scoreAnswer(req, 1.5, 0.6) });
  assert.equal(res.output, '1.5 2\n{"type":"score","label":"2","answer":{"probabilities":{"2":0.6},"confidence":0.6,"score":1.5},"engine":"llm"}');
  assert.deepEqual(res.judges[0].questions.q.criteria, { levels: ["bad", "fine", "great"] });
});

test("a judgment error stays an error", async () => {
  const res = await run("judge_error", { target: "s" });
  assert.deepEqual([res.code, res.error], [1, "pixie_judge: unavailable: no decision engine is configured"]);
  const bad = await run("judge_error", { target: "s", judge: () => ({ answers: {} }) });
  assert.deepEqual([bad.code, bad.error], [1, "pixie_judge: internal: the answer is missing"]);
});

test("an abort traps, with its message on stderr", async () => {
  const res = await run("throws");
  assert.equal(res.code, null);
  assert.match(res.trap, /unreachable/);
  assert.match(res.stderr, /^abort: the rule gave up at test\/fixtures\/rules\.ts:\d+:\d+\n$/);
  const oob = await run("out_of_bounds", { target: "xyz" });
  assert.match(oob.stderr, /^abort: Index out of range/);
});

test("the fake refuses what Pixie refuses", async () => {
  // A module importing env.abort (built without the SDK's abort) or another host's function.
  const mod = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 4, 1, 96, 0, 0, 2, 13, 1, 3, 101, 110, 118, 5, 97, 98, 111, 114, 116, 0, 0]);
  await assert.rejects(new Fake().run(mod), /imports what the host does not provide: function env.abort/);
  await assert.rejects(new Fake().run(wasm, { entry: "nope" }), /does not export the entry point "nope"/);
});

test("parseJSON", async (t) => {
  const cases = [
    ['{"command":"ls -l","n":2.5}', "3:ls -l:2.5"],
    ['{"command":"a","command":"\\u00e9\\ud83d\\ude00\\ud83d"}', "3:é😀\ufffd:NaN"],
    ['{"command":null}', "0::NaN"],
    ["[1]", "not an object"],
    ['{"x":1}', "no command"],
    ['{"command":"x",}', "not JSON"],
    ['{"command":"x"} {}', "not JSON"],
    ["", "not JSON"],
    ['{"command":01}', "not JSON"],
    ['{"command":"\\x"}', "not JSON"],
    ['{"command":' + "[".repeat(2000) + "]".repeat(2000) + "}", "not JSON"], // deeper than the reader's 1000
  ];
  for (const [target, want] of cases) {
    await t.test(target.slice(0, 40), async () => {
      const res = await run("json_command", { target });
      assert.equal(res.trap, null, res.stderr);
      assert.equal(res.output, want);
    });
  }
  assert.equal((await run("json_text", { target: "[1, 2, [3]]" })).output, "3");
});
