# scw-lb-ipam — every target works on a fresh clone with only Go installed.
SHELL := /usr/bin/env bash
GO    ?= go
BIN   := $(CURDIR)/bin
PKGS  := ./...

.PHONY: all build test lint bench run clean

all: build

build: ## Build the binaries into bin/.
	$(GO) build -o $(BIN)/ ./cmd/...

lint: ## gofmt and go vet must be clean.
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

test: lint ## All tests (unit, emulator fidelity, benchmarks compile).
	$(GO) test -count=1 -race $(PKGS)

bench: ## Benchmarks with their numbers.
	$(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

run:
	@echo "make run (the local playground) is not built yet: it arrives with the playground step."; exit 1

clean:
	rm -rf $(BIN)
