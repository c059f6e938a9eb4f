# Pixie's make targets. `make check` runs exactly what CI's quality gate runs.
SHELL := /bin/bash
GO    ?= go
BIN   := bin
HOME_DIR ?= $(CURDIR)/.pixie
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
GUESTS   := $(patsubst guests/%/,%,$(sort $(dir $(wildcard guests/*/main.go))))
# The Go modules of the repository: the server's and the guest SDK's (sdk/go.mod, reached from
# the server's through a replace). `./...` in one module does not enter the other, so vet and
# staticcheck run in each, and once more for the wasip1 code (the SDK's host side and the guests).
MODULES  := . sdk
VET_WASI := (cd sdk && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...) && GOOS=wasip1 GOARCH=wasm $(GO) vet ./guests/...

.PHONY: build run test bench check guests ui clean tools

build: ## build the pixie binary into bin/
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/pixie ./cmd/pixie

run: build ## start the server on 127.0.0.1 with ./.pixie as its home
	$(BIN)/pixie serve --home $(HOME_DIR) --addr $${PIXIE_ADDR:-127.0.0.1:7777}

guests: ## build every WASM guest under guests/ into bin/guests/
	@mkdir -p $(BIN)/guests
	@for g in $(GUESTS); do \
		echo "guest $$g"; \
		GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $(BIN)/guests/$$g.wasm ./guests/$$g || exit 1; \
	done

test: guests ## build the guests, vet, and run every test with the race detector
	@for m in $(MODULES); do echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; done
	$(VET_WASI)
	@# Fill the shared WASM compile cache without -race first: a race-instrumented wazero
	@# compiles a Go guest in tens of seconds, but loads cached code in milliseconds.
	$(GO) test -count=1 -run TestWarmCompileCache ./internal/wasmwarm/
	cd sdk && $(GO) test -race -count=1 ./...
	$(GO) test -race -count=1 -timeout 20m ./...

bench: guests ## run the benchmarks and print the tables
	$(GO) run ./internal/tools/bench

check: ## formatters, go mod tidy, vet, linters, and the import-rule test (in both modules)
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

tools: ## install the pinned agent CLIs the e2e tests drive into $$PIXIE_TOOLS_DIR (~/.cache/pixie-tools)
	.ci/tools.sh

clean:
	rm -rf $(BIN)
