// Builds a test fixture with the same compiler options as `pixie guest build` (see
// internal/guestbuild in the Pixie repository), into a temporary folder.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export function build(entry) {
  const dir = mkdtempSync(join(tmpdir(), "pixie-as-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true })); // nothing left in the temp folder
  const out = join(dir, "guest.wasm");
  execFileSync(process.execPath, [join(root, "node_modules", "assemblyscript", "bin", "asc.js"), entry,
    "--outFile", out, "--optimizeLevel", "3", "--shrinkLevel", "0", "--runtime", "incremental",
    "--exportStart", "_initialize", "--use", "abort=assembly/index/abort"], { cwd: root, stdio: ["ignore", "inherit", "inherit"] });
  return out;
}
