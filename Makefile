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

# ---- tools: the control plane the integration tests run -------------------
# bin/kube-apiserver and bin/etcd are built from the versions pinned in
# test/tools/go.mod, bin/helm from test/tools/helm/go.mod, with the committed
# go.sum files (no checksum-database lookup). A binary is rebuilt only when it
# is missing or its stamp bin/.NAME.version differs: the pinned version plus a
# hash of go.mod's requirements and replaces (not its comments) and of the
# ldflags. The builds run one at a time, niced: kube-apiserver takes 5-6 min on
# a cold build cache (2 cores), etcd and helm 1-2 min each.
TOOLS_DIR := $(CURDIR)/test/tools
TOOLS     := bin/kube-apiserver bin/etcd bin/helm

.PHONY: tools FORCE

tools: ## Build the pinned kube-apiserver, etcd and helm into bin/.
	@$(MAKE) --no-print-directory -j1 $(TOOLS)

# $(call tool_build,MODULE_DIR,MODULE,PACKAGE,EXTRA_LDFLAGS): the recipe of
# the tool binary $@. EXTRA_LDFLAGS may use the shell variables v (the version
# of MODULE pinned in MODULE_DIR/go.mod), major and minor as $$v, $$major...
define tool_build
v=$$(awk -v m='$(2)' '{ sub(/^require[ \t]+/, "") } $$1 == m && $$2 ~ /^v/ { print $$2; exit }' '$(1)/go.mod'); \
[ -n "$$v" ] || { echo "$(1)/go.mod pins no version of $(2)" >&2; exit 1; }; \
major=$${v#v}; major=$${major%%.*}; minor=$${v#v*.}; minor=$${minor%%.*}; \
ldflags="-s -w $(strip $(4))"; \
stamp="$(2) $$v $$( { cd '$(1)' && GOWORK=off $(GO) mod edit -json && echo "$$ldflags"; } | sha256sum | cut -c1-16)"; \
out='$(abspath $@)'; version_file='$(abspath $(@D))/.$(@F).version'; \
if [ -x "$$out" ] && [ "$$(cat "$$version_file" 2>/dev/null)" = "$$stamp" ]; then \
  echo "$@ is up to date ($(2) $$v)"; \
else \
  echo "building $@ ($(2) $$v)…"; \
  mkdir -p '$(@D)' && rm -f "$$version_file" "$$out.tmp" && \
  cd '$(1)' && \
  GOWORK=off CGO_ENABLED=0 GOFLAGS='-mod=readonly -buildvcs=false' \
    nice -n 10 $(GO) build -trimpath -ldflags="$$ldflags" -o "$$out.tmp" '$(3)' && \
  mv -f "$$out.tmp" "$$out" && echo "$$stamp" > "$$version_file"; \
fi
endef

KUBE_VERSION_LDFLAGS := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
  -X $(p).gitVersion=$$v -X $(p).gitMajor=$$major -X $(p).gitMinor=$$minor -X $(p).gitTreeState=clean)

bin/kube-apiserver: FORCE
	@$(call tool_build,$(TOOLS_DIR),k8s.io/kubernetes,k8s.io/kubernetes/cmd/kube-apiserver,$(KUBE_VERSION_LDFLAGS))

bin/etcd: FORCE
	@$(call tool_build,$(TOOLS_DIR),go.etcd.io/etcd/server/v3,go.etcd.io/etcd/server/v3,)

bin/helm: FORCE
	@$(call tool_build,$(TOOLS_DIR)/helm,helm.sh/helm/v4,helm.sh/helm/v4/cmd/helm,-X helm.sh/helm/v4/internal/version.version=$$v -X helm.sh/helm/v4/internal/version.gitTreeState=clean)
