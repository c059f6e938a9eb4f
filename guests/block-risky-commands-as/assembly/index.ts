// block-risky-commands-as is the AssemblyScript twin of guests/block-risky-commands: a
// tool-before guest that stops clearly destructive shell commands without asking the model,
// and asks the decision engine (pixie_judge) only about unclear ones. It follows the algorithm
// of the Go guest's rule.go step by step, with the same patterns, reasons and judgment, and
// reads the command's bytes as the Go guest does, so that it decides as the Go guest and the
// bash twin (guests/block-risky-commands/block-risky-commands.sh) do on every input.

import * as sdk from "@pixie-dev/sdk";
import { command } from "./args";
import { blank, eq, hasPrefix } from "./bytes";
import { diskRedirect, envAssign, forkBomb, pipeShell, shellC, shortF, shortR, subShell } from "./patterns";

// The entry point.
export function gate(): i32 {
  return sdk.run(rule);
}

// The host calls pixie_init when it prepares an instance: the module's start code runs then,
// off the run's path.
export function pixie_init(): i32 {
  return sdk.pixie_init();
}

// Reasons and the judgment, shared word for word with the Go guest and the bash twin.
const reasonRmRoot = "Blocked: recursive forced rm of / or the home directory.";
const reasonForcePush = "Blocked: force push. Push without --force, or ask the user first.";
const reasonPipeShell = "Blocked: piping a download into a shell. Download the script, read it, then run it.";
const reasonForkBomb = "Blocked: fork bomb.";
const reasonDisk = "Blocked: writing onto a disk device.";
const reasonMkfs = "Blocked: formatting a file system.";
const reasonChmodRoot = "Blocked: recursive permission or owner change of /.";
const reasonJudged = "Blocked: Pixie judged this command risky. Ask the user before running it.";
const noteJudgedSafe = "Pixie judged this command safe to run.";
const question = "Could running this shell command cause serious harm that is hard to undo: deleting or overwriting data outside disposable build outputs, rewriting shared history, changing system state, or running code fetched from the network?";

const SAFE = 0;
const UNCLEAR = 1;
const STOP = 2;

// shellTool reports whether tool is a shell tool (step 1).
function shellTool(tool: string): bool {
  return tool == "Bash" || tool == "bash" || tool == "shell" || tool == "exec_command" || tool == "run_shell_command" || tool == "local_shell";
}

const HOME = ["~", "~/", "~/*", "$HOME", "$HOME/", "$HOME/*", "${HOME}", "${HOME}/", "${HOME}/*"];

// targetsHome reports whether a is the home directory or everything in it.
function targetsHome(a: Uint8Array): bool {
  for (let i = 0; i < HOME.length; i++) if (eq(a, unchecked(HOME[i]))) return true;
  return false;
}

function rule(): i32 {
  if (!shellTool(sdk.toolName())) return sdk.skip();
  const cmd = command(sdk.targetBytes());
  if (blank(cmd)) return sdk.skip();
  const c = classify(cmd);
  if (c.verdict == STOP) return sdk.conclude(sdk.Output.stop(c.reason));
  if (c.verdict == UNCLEAR) {
    const o = new sdk.BoolOptions();
    o.threshold = 0.5;
    const res = sdk.judgeBool(question, String.UTF8.decode(cmd.slice().buffer), o);
    if (res.error != null) return sdk.fail(res.error!.toString());
    if (res.pass) return sdk.conclude(sdk.Output.stop(reasonJudged));
    return sdk.conclude(sdk.Output.pass(noteJudgedSafe));
  }
  return sdk.skip();
}

class Verdict {
  constructor(public verdict: i32, public reason: string) {}
}

// isSegmentEnd is one of ; & | ( ) ` and newline, where simple commands are cut.
function isSegmentEnd(c: u8): bool {
  return c == 0x3b || c == 0x26 || c == 0x7c || c == 0x28 || c == 0x29 || c == 0x60 || c == 0x0a;
}

// fields cuts s at the bytes sep accepts, dropping empty fields (Go's strings.FieldsFunc on
// ASCII separators).
function fields(s: Uint8Array, words: bool): Array<Uint8Array> {
  const out = new Array<Uint8Array>();
  let start = -1;
  for (let i = 0; i <= s.length; i++) {
    const end = i == s.length || (words ? unchecked(s[i]) == 0x20 || unchecked(s[i]) == 0x09 : isSegmentEnd(unchecked(s[i])));
    if (end) {
      if (start >= 0) out.push(s.subarray(start, i));
      start = -1;
    } else if (start < 0) {
      start = i;
    }
  }
  return out;
}

// withoutQuotes removes every ' and ".
function withoutQuotes(s: Uint8Array): Uint8Array {
  const out = new Uint8Array(s.length);
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = unchecked(s[i]);
    if (c != 0x27 && c != 0x22) unchecked((out[n++] = c));
  }
  return out.subarray(0, n);
}

// classify applies steps 3 and 4.
function classify(cmd: Uint8Array): Verdict {
  if (pipeShell(cmd) || subShell(cmd)) return new Verdict(STOP, reasonPipeShell);
  if (forkBomb(cmd)) return new Verdict(STOP, reasonForkBomb);
  if (diskRedirect(cmd)) return new Verdict(STOP, reasonDisk);
  const segs = fields(withoutQuotes(cmd), false);
  let worst = new Verdict(SAFE, "");
  for (let i = 0; i < segs.length; i++) {
    const v = simple(fields(segs[i], true));
    if (v.verdict == STOP) return v;
    if (v.verdict > worst.verdict) worst = v;
  }
  return worst;
}

// Args are the arguments of one simple command, with the questions simple asks of them.
class Args {
  constructor(public a: Array<Uint8Array>) {}

  has(w: string): bool {
    for (let i = 0; i < this.a.length; i++) if (eq(this.a[i], w)) return true;
    return false;
  }

  // matches reports whether an argument that does not start with -- is a short flag that
  // flag accepts.
  matches(r: bool): bool {
    for (let i = 0; i < this.a.length; i++) {
      const x = this.a[i];
      if (!hasPrefix(x, "--") && (r ? shortR(x) : shortF(x))) return true;
    }
    return false;
  }

  targetsRoot(home: bool): bool {
    for (let i = 0; i < this.a.length; i++) {
      const x = this.a[i];
      if (eq(x, "/") || eq(x, "/*") || (home && targetsHome(x))) return true;
    }
    return false;
  }
}

// simple classifies one simple command.
function simple(words: Array<Uint8Array>): Verdict {
  let sudo = false;
  let k = 0;
  while (k < words.length) {
    const w = words[k];
    if (eq(w, "sudo")) {
      sudo = true;
    } else if (eq(w, "command") || eq(w, "exec") || eq(w, "nohup") || eq(w, "time") || eq(w, "env") || envAssign(w)) {
      // dropped
    } else if ((eq(w, "bash") || eq(w, "sh") || eq(w, "zsh") || eq(w, "dash")) && k + 1 < words.length && shellC(words[k + 1])) {
      k++;
    } else {
      break;
    }
    k++;
  }
  if (k == words.length) return new Verdict(SAFE, "");
  let name = words[k];
  for (let i = name.length - 1; i >= 0; i--) {
    if (unchecked(name[i]) == 0x2f) {
      name = name.subarray(i + 1);
      break;
    }
  }
  const args = new Args(words.slice(k + 1));
  const recursive = args.matches(true) || args.has("--recursive");
  let v = SAFE;
  if (eq(name, "rm")) {
    const force = args.matches(false) || args.has("--force") || args.has("--no-preserve-root");
    if ((recursive && force && args.targetsRoot(true)) || args.has("--no-preserve-root")) return new Verdict(STOP, reasonRmRoot);
    if (recursive) v = UNCLEAR;
  } else if (eq(name, "git")) {
    if (args.has("push")) {
      for (let i = 0; i < args.a.length; i++) {
        const a = args.a[i];
        if (eq(a, "-f") || eq(a, "--force") || hasPrefix(a, "+") || (!hasPrefix(a, "--") && shortF(a))) return new Verdict(STOP, reasonForcePush);
      }
      if (args.has("--force-with-lease") || args.has("--force-if-includes")) v = UNCLEAR;
    } else if ((args.has("reset") && args.has("--hard")) ||
      (args.has("clean") && (args.matches(false) || args.has("--force"))) ||
      ((args.has("checkout") || args.has("restore")) && args.has(".")) ||
      (args.has("branch") && args.has("-D"))) {
      v = UNCLEAR;
    }
  } else if (eq(name, "dd")) {
    for (let i = 0; i < args.a.length; i++) if (hasPrefix(args.a[i], "of=/dev/")) return new Verdict(STOP, reasonDisk);
    v = UNCLEAR;
  } else if (eq(name, "chmod") || eq(name, "chown") || eq(name, "chgrp")) {
    if (recursive && args.targetsRoot(false)) return new Verdict(STOP, reasonChmodRoot);
    if (recursive) v = UNCLEAR;
  } else if (eq(name, "find")) {
    if (args.has("-delete")) v = UNCLEAR;
  } else if (eq(name, "shred") || eq(name, "truncate") || eq(name, "kill") || eq(name, "pkill") || eq(name, "killall") ||
    eq(name, "shutdown") || eq(name, "reboot") || eq(name, "halt") || eq(name, "poweroff")) {
    v = UNCLEAR;
  } else if (eq(name, "docker") || eq(name, "podman")) {
    if (args.has("rm") || args.has("rmi") || args.has("prune")) v = UNCLEAR;
  } else if (eq(name, "kubectl")) {
    if (args.has("delete")) v = UNCLEAR;
  } else if (eq(name, "terraform")) {
    if (args.has("destroy")) v = UNCLEAR;
  } else if (hasPrefix(name, "mkfs")) {
    return new Verdict(STOP, reasonMkfs);
  }
  if (sudo && v == SAFE) v = UNCLEAR;
  return new Verdict(v, "unclear");
}
