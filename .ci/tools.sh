#!/usr/bin/env bash
# Installs the pinned npm tools the end-to-end tests drive (never a dependency of Pixie itself):
# Claude Code, Codex and the MCP inspector, into a cache folder outside the repository.
#
#   .ci/tools.sh            install what is missing (idempotent: a second run does nothing),
#                           then print the folder that holds the commands (claude, codex,
#                           mcp-inspector)
#   .ci/tools.sh --check    exit 0 when everything pinned is installed, 1 otherwise (no network)
#   .ci/tools.sh --bin      print the bin folder only
#
# Folder: $PIXIE_TOOLS_DIR, default $HOME/.cache/pixie-tools. Each pin lives in its own prefix
# (<dir>/<name>@<version>), so changing a version installs beside the old one; <dir>/bin holds
# links to the pinned versions. Tests find the commands there (internal/testutil.Tool), or
# through PIXIE_CLAUDE_BIN, PIXIE_CODEX_BIN and PIXIE_MCP_INSPECTOR_BIN.
set -euo pipefail

# package@version  command-in-the-package  name-in-bin
PINS=(
  "@anthropic-ai/claude-code@2.1.328 claude claude"
  "@openai/codex@0.171.0 codex codex"
  "@modelcontextprotocol/inspector@2.12.0 mcp-inspector mcp-inspector"
)

dir="${PIXIE_TOOLS_DIR:-$HOME/.cache/pixie-tools}"
mode="${1:-install}"
bin="$dir/bin"

case "$mode" in
  install|--check|--bin) ;;
  -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "tools.sh: unknown argument $mode (see --help)" >&2; exit 2 ;;
esac
if [ "$mode" = --bin ]; then echo "$bin"; exit 0; fi

missing=0
for pin in "${PINS[@]}"; do
  read -r pkg cmd name <<<"$pin"
  prefix="$dir/${pkg//\//+}"
  target="$prefix/node_modules/.bin/$cmd"
  if [ ! -x "$target" ] || [ ! -f "$prefix/.pixie-installed" ]; then
    if [ "$mode" = --check ]; then
      echo "tools.sh: $pkg is not installed in $dir" >&2
      missing=1
      continue
    fi
    command -v npm >/dev/null || { echo "tools.sh: npm is needed (apt-get install npm)" >&2; exit 1; }
    echo "tools.sh: installing $pkg into $prefix" >&2
    rm -rf "$prefix"
    mkdir -p "$prefix"
    # --prefix keeps it out of the repository and out of the global node_modules.
    (cd "$prefix" && npm install --prefix "$prefix" --no-save --no-audit --no-fund \
      --loglevel=error "$pkg" >&2)
    [ -x "$target" ] || { echo "tools.sh: $pkg installed no $cmd command" >&2; exit 1; }
    date -u +%FT%TZ >"$prefix/.pixie-installed"
  fi
  if [ "$mode" = install ]; then
    mkdir -p "$bin"
    ln -sfn "$target" "$bin/$name"
  fi
done
if [ "$mode" = --check ]; then exit "$missing"; fi
echo "$bin"
