# Pixie's make targets. CI (.ci/run, on a clean Debian machine) installs what the tests need
# (the agent CLIs, `make npm`, PostgreSQL), then runs `make check` and `make test`, in that
# order; it does not run `make bench` (performance is measured on a quiet machine).
SHELL := /bin/bash
GO    ?= go
BIN   := bin
# The home: empty means what every command uses, $PIXIE_HOME, else ~/.pixie (`make run HOME_DIR=…`
# picks another).
HOME_DIR ?=
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
GUESTS   := $(patsubst guests/%/,%,$(sort $(dir $(wildcard guests/*/main.go))))
# AssemblyScript guests (an asconfig.json beside package.json), and every npm package folder
# (each with its package-lock.json): the AssemblyScript SDK and guests, and the pinned
# TypeScript that type-checks Studio (internal/tools/tsc, used by `make check` only).
AS_GUESTS := $(patsubst guests/%/,%,$(sort $(dir $(wildcard guests/*/asconfig.json))))
TSC_DIR   := internal/tools/tsc
NPM_DIRS  := sdk/assemblyscript $(addprefix guests/,$(AS_GUESTS)) $(TSC_DIR)
# npm_ci installs a folder's pinned packages (npm ci, from npm's cache when it can) when they
# are missing or older than its package-lock.json.
npm_ci = if [ ! -f $(1)/node_modules/.package-lock.json ] || [ $(1)/package-lock.json -nt $(1)/node_modules/.package-lock.json ]; then \
	echo "npm ci ($(1))"; (cd $(1) && npm ci --no-audit --no-fund --prefer-offline --loglevel=error) || exit 1; fi
# The Go modules of the repository: the server's and the guest SDK's (sdk/go.mod, reached from
# the server's through a replace). `./...` in one module does not enter the other, so vet and
# staticcheck run in each, and once more for the wasip1 code (the SDK's host side and the guests).
MODULES  := . sdk
VET_WASI := (cd sdk && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...) && GOOS=wasip1 GOARCH=wasm $(GO) vet ./guests/...

.PHONY: build run install test bench soak check guests npm ui clean tools

# COMPANIONS ship beside pixie, built without cgo (static binaries start faster): the sandbox
# init every hook script run starts (cmd/pixie-sandbox, docs/sandbox.md) and the command hook
# adapter pixie init writes into command hooks (cmd/pixie-hook, docs/agents/claude-code.md).
COMPANIONS := ./cmd/pixie-sandbox ./cmd/pixie-hook

build: ## build the pixie binary, and the programs that ship beside it, into bin/
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/pixie ./cmd/pixie
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ $(COMPANIONS)

run: build ## start the server on 127.0.0.1:7777 with the home every command uses ($PIXIE_HOME, else ~/.pixie)
	$(BIN)/pixie serve $(if $(HOME_DIR),--home $(HOME_DIR)) --addr $${PIXIE_ADDR:-127.0.0.1:7777}

# install: `go install` when its folder is on PATH, else ~/.local/bin (with a note when that is
# not on PATH either). INSTALL_DIR=… picks the folder.
install: ## put pixie (and the programs that ship beside it) on PATH (go install, else ~/.local/bin)
	@set -e; gobin=$$($(GO) env GOBIN); [ -n "$$gobin" ] || gobin=$$($(GO) env GOPATH)/bin; \
	dir="$(INSTALL_DIR)"; \
	onpath() { case ":$$PATH:" in *":$$1:"*) return 0;; esac; return 1; }; \
	if [ -z "$$dir" ] && onpath "$$gobin"; then \
		$(GO) install -ldflags "$(LDFLAGS)" ./cmd/pixie; CGO_ENABLED=0 $(GO) install -ldflags "$(LDFLAGS)" $(COMPANIONS); dir="$$gobin"; \
	else \
		[ -n "$$dir" ] || dir="$$HOME/.local/bin"; mkdir -p "$$dir"; \
		$(GO) build -ldflags "$(LDFLAGS)" -o "$$dir/pixie" ./cmd/pixie; \
		CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o "$$dir/" $(COMPANIONS); \
	fi; \
	echo "installed $$dir/pixie ($$("$$dir/pixie" version))"; \
	if ! onpath "$$dir"; then \
		echo "note: $$dir is not on your PATH; add it, e.g.:"; \
		echo "  echo 'export PATH=\"$$dir:\$$PATH\"' >> ~/.bashrc && export PATH=\"$$dir:\$$PATH\""; \
	elif [ "$$(command -v pixie)" != "$$dir/pixie" ]; then \
		echo "note: another pixie comes first on PATH: $$(command -v pixie)"; \
	fi

npm: ## install the pinned npm packages (AssemblyScript SDK and guests, Studio's TypeScript) with npm ci, from npm's cache when it can
	@for d in $(NPM_DIRS); do $(call npm_ci,$$d); done

guests: npm ## build every WASM guest under guests/ (Go and AssemblyScript) into bin/guests/
	@mkdir -p $(BIN)/guests
	@for g in $(GUESTS); do \
		echo "guest $$g"; \
		GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $(BIN)/guests/$$g.wasm ./guests/$$g || exit 1; \
	done
	@for g in $(AS_GUESTS); do \
		echo "guest $$g (AssemblyScript)"; \
		$(GO) run ./cmd/pixie guest build guests/$$g -o $(BIN)/guests/$$g.wasm >/dev/null || exit 1; \
	done

test: guests ## build the guests, vet, and run every test with the race detector
	@for m in $(MODULES); do echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; done
	$(VET_WASI)
	@# Fill the shared WASM compile cache without -race first: a race-instrumented wazero
	@# compiles a Go guest in tens of seconds, but loads cached code in milliseconds.
	$(GO) test -count=1 -run TestWarmCompileCache ./internal/wasmwarm/
	@# The WASM rewriter's differential test over the WebAssembly spec suite runs without -race
	@# (about 10 s; minutes under -race, where it is skipped).
	$(GO) test -count=1 ./runtime/wasm/internal/instrument/
	cd sdk && $(GO) test -race -count=1 ./...
	@# The AssemblyScript SDK and guests: node's test runner against the SDK's fake host.
	cd sdk/assemblyscript && npm test
	@for g in $(AS_GUESTS); do (cd guests/$$g && npm test) || exit 1; done
	$(GO) test -race -count=1 -timeout 20m ./...

# bench: the Go benchmarks, then the sustained-load rows against bin/pixie and OPA (built once
# into $$PIXIE_TOOLS_DIR, ~/.cache/pixie-tools); BENCH_FLAGS passes flags (docs/bench.md), e.g.
# BENCH_FLAGS='-go=false -load-rows wasm'. The PostgreSQL rows (internal/scale) need a server:
# PIXIE_TEST_POSTGRES_URL, else the one .ci/postgres.sh starts (root or sudo); without either
# they are skipped, saying so.
bench: build guests ## run the benchmarks and the sustained-load rows, and print the tables (docs/bench.md)
	@url="$${PIXIE_TEST_POSTGRES_URL:-$$(.ci/postgres.sh 2>/dev/null || true)}"; \
	 [ -n "$$url" ] || echo "bench: no PostgreSQL (set PIXIE_TEST_POSTGRES_URL): its rows are skipped"; \
	 PIXIE_TEST_POSTGRES_URL="$$url" $(GO) run ./internal/tools/bench $(BENCH_FLAGS)

# soak: 10 minutes at 8 connections on the WASM gate with ten modules warm, a line per minute
# (req/s, p50, p99, RSS, Go heap, data dir) and a verdict against issue 32's targets
# (docs/bench.md); SOAK_FLAGS passes flags, e.g. SOAK_FLAGS='-duration 2m -every 20s'. Not run by CI.
soak: build guests ## run the soak (10 min, 8 connections, a line a minute) and print its verdict (docs/bench.md)
	$(GO) run ./internal/tools/bench soak $(SOAK_FLAGS)

check: ## formatters, go mod tidy, vet, linters, the import-rule test (in both modules), and tsc over Studio
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do echo "go mod tidy -diff ($$m)"; (cd $$m && $(GO) mod tidy -diff) || { echo "go.mod or go.sum of $$m is not tidy: run go mod tidy there"; exit 1; }; done
	@for m in $(MODULES); do echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; done
	$(VET_WASI)
	@# staticcheck is installed into bin/ (not `go run`), so that GOOS=wasip1 applies to the
	@# code it checks and not to staticcheck itself.
	@if command -v staticcheck >/dev/null; then sc=staticcheck; \
	 elif GOBIN=$(CURDIR)/$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2 2>/dev/null; then sc=$(CURDIR)/$(BIN)/staticcheck; \
	 else echo "staticcheck not installable here; skipped"; exit 0; fi; \
	 for m in $(MODULES); do echo "staticcheck ($$m)"; (cd $$m && $$sc ./...) || exit 1; done; \
	 echo "staticcheck (wasip1: sdk, guests)"; (cd sdk && GOOS=wasip1 GOARCH=wasm $$sc ./...) && GOOS=wasip1 GOARCH=wasm $$sc ./guests/...
	$(GO) test -count=1 -run 'TestImportRules|TestSDKModuleGraph' ./internal/importrules/
	@# Studio (server/ui): its modules import one way (lib → pages → shell), each opts in to type
	@# checking, and none copies the point table; then the pinned TypeScript (internal/tools/tsc)
	@# checks them from their JSDoc with tsc --noEmit: lib/ under strict, the pages and the shell
	@# without null checks.
	$(GO) test -count=1 -run 'TestStudioImportsOneWay|TestStudioModulesAreTypeChecked|TestStudioKeepsNoCopyOfThePointTable' ./server/
	@$(call npm_ci,$(TSC_DIR))
	cd $(TSC_DIR) && npm run --silent check

tools: ## install the pinned agent CLIs the e2e tests drive into $$PIXIE_TOOLS_DIR (~/.cache/pixie-tools)
	.ci/tools.sh

clean:
	rm -rf $(BIN)
