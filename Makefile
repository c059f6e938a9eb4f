# Pixie's make targets. `make check` runs exactly what CI's quality gate runs.
SHELL := /bin/bash
GO    ?= go
BIN   := bin
HOME_DIR ?= $(CURDIR)/.pixie
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
GUESTS   := $(patsubst guests/%/,%,$(sort $(dir $(wildcard guests/*/main.go))))

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
	$(GO) vet ./...
	@# Fill the shared WASM compile cache without -race first: a race-instrumented wazero
	@# compiles a Go guest in tens of seconds, but loads cached code in milliseconds.
	$(GO) test -count=1 -run TestWarmCompileCache ./internal/wasmwarm/
	$(GO) test -race -count=1 -timeout 20m ./...

bench: guests ## run the benchmarks and print the tables
	$(GO) run ./internal/tools/bench

check: ## formatters, vet, linters, and the import-rule test
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if command -v staticcheck >/dev/null; then staticcheck ./...; \
	 elif $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -version >/dev/null 2>&1; then $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...; \
	 else echo "staticcheck not installable here; skipped"; fi
	$(GO) test -count=1 -run TestImportRules ./internal/importrules/

tools: ## install the pinned agent CLIs the e2e tests drive into $$PIXIE_TOOLS_DIR (~/.cache/pixie-tools)
	.ci/tools.sh

clean:
	rm -rf $(BIN)
