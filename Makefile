# scw-lb-ipam — every target works on a fresh clone with only Go installed.
SHELL := /usr/bin/env bash
GO    ?= go
BIN   := $(CURDIR)/bin
PKGS  := ./...
# One build configuration for everything make test compiles of this module
# (go vet, staticcheck, the tests, the image, the binaries the suites run):
# the image's, static, without the checkout's path and without DWARF. Cold
# on 2 cores each other configuration is one more compile of the whole
# dependency graph; the race detector, which needs cgo, is make race's.
# DWARF is for debuggers only (stack traces, pprof and the race detector read
# the pclntab): without it a cold compile of the webhook's graph took 240 s
# instead of 301 (user 341 s instead of 431). A GOFLAGS of the environment
# comes last, so its -gcflags or -ldflags win; make GOFLAGS= (on make's
# command line) builds as go does, for a debugger.
NO_DWARF := -gcflags=all=-dwarf=false
export CGO_ENABLED := 0
export GOFLAGS := $(strip -trimpath $(NO_DWARF) -ldflags=-w $(GOFLAGS))
# Suites on a real kube-apiserver and etcd; everything else is unit-level.
# The neighbours' suites (external-dns with BIND, Envoy Gateway) need the
# tools make test builds last (see test).
CONTROL_PLANE_SUITES := ./test/integration ./test/clients ./test/chart ./test/playground ./test/chaos
NEIGHBOUR_SUITES     := ./test/dns ./test/gateway
SUITES               := $(CONTROL_PLANE_SUITES) $(NEIGHBOUR_SUITES)
UNIT   := $(shell $(GO) list ./... 2>/dev/null | grep -vE '/test/(integration|clients|dns|gateway|chart|playground|chaos|bench|e2e)$$')

.PHONY: all build test unit unit-full race suites lint bench run clean crds fuzz chaos image e2e e2e-packages previous help generate verify \
  test-build test-control-plane test-e2e test-e2e-tools test-neighbour-tools test-neighbours

all: build

# help prints every target that carries a "## " description, in file order.
help: ## This list: each target and what it does.
	@awk 'BEGIN { FS = ":[^#]*## " } /^[a-zA-Z0-9_.-]+:[^=]*## / { printf "  %-10s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

build: ## Build the binaries into bin/.
	$(GO) build -o bin/ ./cmd/...

# The module's own imports form the last group (goimports -local).
MODULE := github.com/scw-lb-ipam/scw-lb-ipam
GOFILES = $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')

lint: bin/actionlint bin/goimports bin/staticcheck ## gofmt, goimports, go vet, staticcheck and actionlint (the workflows) must be clean.
	@out=$$(gofmt -l $(GOFILES)); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@out=$$($(BIN)/goimports -local $(MODULE) -l $(GOFILES)); \
	  if [ -n "$$out" ]; then echo "goimports -local $(MODULE) would change (import grouping):"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(BIN)/staticcheck $(PKGS)
	$(BIN)/actionlint

# ---- image: what the chart runs, built without Docker ----------------------
# The version has one source, the chart's appVersion: the image tag, the
# binary's "scw-lb-ipam version" and the chart agree by construction, and the
# release checks the git tag against it. Every timestamp in the image is
# SOURCE_DATE_EPOCH, the commit's time: two builds of a commit with the same
# Go toolchain give the same index digest (bin/image/index.digest).
CHART             := charts/scw-lb-ipam
VERSION           ?= $(shell sed -n 's/^appVersion: *//p' $(CHART)/Chart.yaml | tr -d '"')
REVISION          ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# The chart's image.repository; the release pushes to its owner's GHCR.
IMAGE_REPOSITORY  ?= ghcr.io/scw-lb-ipam/scw-lb-ipam
# docker load takes one platform: the docker tarball holds this one.
IMAGE_TAR_ARCH    ?= amd64
# The tests build the amd64 image they run; the release builds every
# architecture (make image IMAGE_ARCHES=amd64,arm64): cold on 2 cores, the
# arm64 build of every dependency costs minutes no test needs.
IMAGE_ARCHES      ?= amd64

image: ## The OCI image (IMAGE_ARCHES: linux/amd64; the release adds arm64), docker tarball and SBOM, into bin/image/.
	$(GO) run ./cmd/scw-image build -out $(BIN)/image -version '$(VERSION)' -revision '$(REVISION)' \
	  -source-date-epoch '$(SOURCE_DATE_EPOCH)' -repository '$(IMAGE_REPOSITORY)' -tarball-arch '$(IMAGE_TAR_ARCH)' -arches '$(IMAGE_ARCHES)'

# make test: lint and verify first (they fail within minutes), then the
# control plane's tools, the CRDs, the image and the unit tests, alone on the
# CPU (test-build). Then up to three jobs at once: the control plane's
# suites; the tools only later steps need, built at nice 19 on the CPU the
# suites leave idle (2 cores, vmstat: about 90%), the node's and the previous
# version first, then external-dns and Envoy Gateway; and, as each set is
# built, e2e and the neighbours' suites, which leave the CPU mostly idle too
# (e2e 46-94%). No two share a network or mount namespace or a TMPDIR;
# each takes the loopback ports the kernel gives it as it starts. Two
# compiles at once cost more than one after the other: cold on 2 cores, a
# niced build beside the control plane's slowed it by 12.5 min while doing
# 8.5 min of its own work. A job that fails fails make test once the
# others have finished.
test: lint verify ## Every test: unit, emulator fidelity, chart, real control plane, the chart on a real kubelet.
	@$(MAKE) --no-print-directory -j3 test-control-plane test-e2e test-neighbours

# $(call in_order,TARGETS): make each of TARGETS, one after the other, in a
# make running several jobs (a sub-make's -j1 there resets the jobserver,
# with a warning). The lines that call it start with + : make passes the
# jobserver only to lines it knows recurse.
define in_order
for t in $(1); do $(MAKE) --no-print-directory "$$t" || exit 1; done
endef

# $(call logged,COMMAND): COMMAND's output kept in bin/.<target>.log and
# printed whole when it ends, so that jobs running at once do not
# interleave their lines (ci.yml prints the logs of a run cut short).
define logged
mkdir -p $(BIN); echo "$@: started; its output follows when it ends (bin/.$@.log)"; \
( $(1) ) > $(BIN)/.$@.log 2>&1; rc=$$?; cat $(BIN)/.$@.log; exit $$rc
endef

test-build:
	+@$(call in_order,$(CONTROL_PLANE_TOOLS) crds image unit-full)

test-e2e-tools: test-build
	+@$(call logged,nice -n 19 sh -c '$(call in_order,e2e-packages bin/registry bin/cosign previous bin/kubelet bin/kube-controller-manager bin/kube-scheduler)')

# The neighbours' tools come last: their suites, which follow them, are the
# shortest.
test-neighbour-tools: test-e2e-tools
	+@$(call logged,nice -n 19 sh -c '$(call in_order,$(NEIGHBOUR_TOOLS))')

test-control-plane: test-build
	@$(call run_suites,$(CONTROL_PLANE_SUITES))

test-e2e: test-build test-e2e-tools
	@$(call logged,$(run_e2e))

test-neighbours: test-build test-neighbour-tools
	@$(call logged,$(call run_suites,$(NEIGHBOUR_SUITES)))

# ---- generate and verify: one source for the pool file, the metrics, the ---
# denial reasons and the chart's values (internal/docs reads the Go types,
# their doc comments and values.yaml's "# --" comments).
generate: ## Write the generated docs and the pool file's part of values.schema.json from the code.
	$(GO) run ./cmd/scw-docs -root $(CURDIR)

verify: ## Fail, naming the file and make generate, when a generated file is out of date.
	$(GO) run ./cmd/scw-docs -root $(CURDIR) -verify

# test/bench's tests (its statistics) run here too, without its benchmarks.
# make unit is the contributor's loop: -short leaves out the image built
# twice (cmd/scw-image) and runs the emulator's 10,000-IP listing at 2,000;
# make test runs them whole (unit-full).
unit: ## The unit tests, the emulator's fidelity test and the benchmarks compiled, in about 40 s warm (-short).
	$(GO) test -short -count=1 -timeout 30m $(UNIT) ./test/bench

unit-full: ## The unit tests whole, as make test runs them: make unit plus the image's reproducibility build and the emulator's 10,000-IP listing.
	IMAGE_ARCHES='$(IMAGE_ARCHES)' $(GO) test -count=1 -timeout 30m $(UNIT) ./test/bench

# The unit tests again under the race detector: cgo, and a compile of the
# whole dependency graph of its own (about 8 min cold on 2 cores). CI runs
# it after make test (.ci/run, ci.yml).
race: ## The unit tests under the race detector (CI runs it after make test).
	CGO_ENABLED=1 IMAGE_ARCHES='$(IMAGE_ARCHES)' $(GO) test -count=1 -race -timeout 30m $(UNIT) ./test/bench

# own_tmp runs a command with a TMPDIR of its own. envtest stops its
# processes itself (SIGTERM, then SIGKILL); a test run killed midway may
# leave some behind, and they all name that TMPDIR on their command line
# (etcd's data dir, the apiserver's certificates): on exit, those processes
# are stopped, and no other (a running playground, another project's).
define own_tmp
tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/scw-lb-ipam-make.XXXXXX"); \
trap 'for p in $$(grep -lsaF "$$tmp/" /proc/[0-9]*/cmdline | cut -d/ -f3); do kill -9 "$$p" 2>/dev/null; done; rm -rf "$$tmp"' EXIT; \
export TMPDIR="$$tmp";
endef

# The suites print one line per scenario (-v); passing tests' chatter is
# filtered.
define run_suites
set -o pipefail; $(own_tmp) \
  CHAOS_LOGS_DIR=$(BIN)/chaos-logs $(GO) test -p 1 -count=1 -timeout 30m -v $(1) 2>&1 | grep -vE '^(=== (RUN|PAUSE|CONT)|\s*--- PASS)'
endef

suites: tools crds image ## The suites on a real kube-apiserver, etcd and helm; the chart's runs the image's binary.
	@$(call run_suites,$(SUITES))

# The full chaos run; make test runs a short one (200 operations, seed 1).
CHAOS_OPS     ?= 1500
CHAOS_CLIENTS ?= 12
CHAOS_SEED    ?= $(shell date +%s)
chaos: tools ## Faults and concurrency on a real control plane, then the eight invariants.
	@set -o pipefail; $(own_tmp) \
	  CHAOS_OPS=$(CHAOS_OPS) CHAOS_CLIENTS=$(CHAOS_CLIENTS) CHAOS_SEED=$(CHAOS_SEED) CHAOS_LOGS_DIR=$(BIN)/chaos-logs \
	  $(GO) test -count=1 -timeout 60m -v ./test/chaos 2>&1 | grep -vE '^(=== (RUN|PAUSE|CONT)|\s*--- PASS)'

# ---- e2e: the chart installed for real ------------------------------------
# A single-node cluster built from source (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet) on Debian's containerd
# and runc, in a network and a mount namespace the suite makes; helm install
# of the chart with the image make image built. Needs root: without it the suite says so and skips
# (SCW_LB_IPAM_REQUIRE_ROOT=1, as CI sets, makes that an error). The suite checks
# that it leaves nothing on the host.
E2E_PACKAGES := containerd runc containernetworking-plugins iptables jq

define run_e2e
set -o pipefail; $(own_tmp) \
  $(GO) test -count=1 -timeout 30m -v ./test/e2e 2>&1 | grep -vE '^(=== (RUN|PAUSE|CONT)|\s*--- PASS)'
endef

e2e: tools image e2e-packages ## The chart on a real kubelet (root; installs the Debian packages it needs).
	@$(MAKE) --no-print-directory -j1 $(E2E_TOOLS) previous
	@$(run_e2e)

# previous: the chart and the image of the version the e2e suite upgrades
# from and rolls back to, built from that commit's tree (scw-image -dir,
# amd64) into bin/previous/ (src/ the tree, image/ the image, .commit the
# commit and a hash of the go.mod and go.sum it was built with). Until a
# release is tagged, the commit that landed shares and handover, whose ledger
# has neither release-at (as a release time) nor the namespace tag. A
# shallow clone fetches it. Its code and chart are that commit's; its
# dependencies are this commit's go.mod and go.sum, so that they compile
# once for both versions (what the upgrade run tests is the ledger, which
# is the code's); were this go.mod to drop a module that code imports, the
# build fails, naming the package. The tree is unpacked and removed under a
# dot-prefixed name, which ./... skips: until its go.mod is written (or
# after it is removed), a tree under bin/previous would be packages of this
# module to the go list and go vet that make test runs beside it.
PREVIOUS_COMMIT := 783cd0d16d5f5d823affbddca7220d3748689d99

previous: ## Build the previous version's chart and image into bin/previous (make e2e does it).
	@set -e; dir='$(BIN)/previous'; \
	stamp="$(PREVIOUS_COMMIT) $$(cat go.mod go.sum | sha256sum | cut -c1-16)"; \
	if [ "$$(cat "$$dir/.commit" 2>/dev/null)" = "$$stamp" ] && [ -f "$$dir/image/index.digest" ]; then \
	  echo "bin/previous is up to date ($(PREVIOUS_COMMIT))"; exit 0; fi; \
	git cat-file -e '$(PREVIOUS_COMMIT)^{commit}' 2>/dev/null || git fetch -q --depth 1 origin '$(PREVIOUS_COMMIT)'; \
	echo "building bin/previous ($(PREVIOUS_COMMIT))…"; \
	tmp='$(BIN)/.previous.tmp'; old='$(BIN)/.previous.old'; rm -rf "$$tmp" "$$old"; \
	if [ -e "$$dir" ]; then mv "$$dir" "$$old" && rm -rf "$$old"; fi; \
	mkdir -p "$$tmp/src" && git archive '$(PREVIOUS_COMMIT)' | tar -x -C "$$tmp/src" && \
	cp go.mod go.sum "$$tmp/src/" && \
	$(GO) run ./cmd/scw-image build -dir "$$tmp/src" -out "$$tmp/image" -arches amd64 \
	  -version "$$(sed -n 's/^appVersion: *//p' "$$tmp/src/charts/scw-lb-ipam/Chart.yaml" | tr -d '\"')" -revision '$(PREVIOUS_COMMIT)' \
	  -source-date-epoch "$$(git log -1 --format=%ct '$(PREVIOUS_COMMIT)')" -repository '$(IMAGE_REPOSITORY)' >/dev/null && \
	echo "$$stamp" > "$$tmp/.commit" && mv "$$tmp" "$$dir"

e2e-packages:
	@missing=$$(for p in $(E2E_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' "$$p" 2>/dev/null | grep -q '^install ok installed$$' || echo "$$p"; done); \
	if [ -n "$$missing" ]; then \
	  echo "make e2e: installing the Debian packages the node needs:" $$missing; \
	  if [ "$$(id -u)" != 0 ]; then \
	    if [ "$${SCW_LB_IPAM_REQUIRE_ROOT:-}" = 1 ]; then echo "make e2e: needs root (apt-get install, namespaces, mounts, cgroups)" >&2; exit 1; fi; \
	    echo "make e2e: not root: the packages stay uninstalled and the suite skips"; exit 0; \
	  fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

FUZZTIME ?= 10m
fuzz: ## Each fuzz target for FUZZTIME (make test runs their seed corpora).
	$(GO) test -run='^$$' -fuzz='^FuzzParseConfig$$' -fuzztime=$(FUZZTIME) ./ipam
	$(GO) test -run='^$$' -fuzz='^FuzzParseRequest$$' -fuzztime=$(FUZZTIME) ./request
	$(GO) test -run='^$$' -fuzz='^FuzzAdmissionReview$$' -fuzztime=$(FUZZTIME) ./webhook

# The image's RSS under load is measured first, on a control plane of its
# own; the table prints it under the burst it sizes.
bench: tools crds image ## The benchmark table (real control plane) with the image's RSS under load, then the Go benchmarks.
	@set -o pipefail; $(own_tmp) \
	  rss="$$tmp/webhook-rss.txt"; \
	  $(GO) test -run='^$$' -bench=BenchmarkWebhookRSS -benchtime=1x -timeout 10m ./test/chart | grep -vE '^(goos|goarch|pkg|cpu|PASS|ok|BenchmarkWebhookRSS)' > "$$rss" \
	    || { cat "$$rss"; exit 1; }; \
	  SCW_LB_IPAM_BENCH_RSS="$$rss" $(GO) test -run='^$$' -bench=BenchmarkReport -benchtime=1x -timeout 30m ./test/bench | grep -vE '^(goos|goarch|pkg|cpu|PASS|ok|BenchmarkReport)'
	$(GO) test -run='^$$' -bench=. -benchmem $(UNIT)

run: tools build ## The playground: kube-apiserver, etcd, the emulator and scw-lb-ipam, until Ctrl-C.
	@exec $(BIN)/scw-playground -root $(CURDIR)

clean: ## Remove bin/ (the tools, the binaries, the image).
	rm -rf $(BIN)

# ---- crds: third-party CRDs the chart's objects need on the test apiserver --
# Copied from the modules pinned in test/crds/go.mod (checked against go.sum).
crds: bin/crds/.stamp ## Copy the third-party CRDs the chart's objects need into bin/crds.

bin/crds/.stamp: test/crds/go.mod test/crds/go.sum
	@mkdir -p bin/crds
	@cd test/crds && \
	  cm=$$(GOWORK=off GOFLAGS=-mod=readonly $(GO) mod download -json github.com/cert-manager/cert-manager | sed -n 's/.*"Dir": "\(.*\)",/\1/p') && \
	  po=$$(GOWORK=off GOFLAGS=-mod=readonly $(GO) mod download -json github.com/prometheus-operator/prometheus-operator | sed -n 's/.*"Dir": "\(.*\)",/\1/p') && \
	  [ -n "$$cm" ] && [ -n "$$po" ] && \
	  cp -f "$$cm"/deploy/crds/cert-manager.io_*.yaml "$$po"/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml "$$po"/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml $(BIN)/crds/ && \
	  chmod u+w $(BIN)/crds/*.yaml
	@touch $@
	@echo "bin/crds: $$(ls bin/crds | grep -c yaml) CRDs"

# ---- tools: the control plane the integration tests run -------------------
# bin/kube-apiserver, bin/kubectl and bin/etcd are built from the versions
# pinned in test/tools/go.mod, bin/helm from test/tools/helm/go.mod, the
# programs that run beside the webhook (the CCM, external-dns, Envoy Gateway,
# the registry and cosign) from test/tools/neighbours/go.mod, with the
# committed go.sum files (no checksum-database lookup). A binary is rebuilt
# only when it is missing or its stamp bin/.NAME.version differs: the pinned
# version plus a hash of go.mod's requirements and replaces (not its comments)
# and of the ldflags. The builds run one at a time, niced (make test builds
# the rest beside its suites, see test): kube-apiserver takes 5-6 min on a cold
# build cache (2 cores), kubectl then about 1.5 min (it shares most of
# kube-apiserver's packages), etcd and helm 1-2 min each.
TOOLS_DIR := $(CURDIR)/test/tools
NEIGHBOURS_DIR := $(TOOLS_DIR)/neighbours
CONTROL_PLANE_TOOLS := bin/kube-apiserver bin/kubectl bin/etcd bin/helm bin/scaleway-cloud-controller-manager
NEIGHBOUR_TOOLS     := bin/external-dns bin/envoy-gateway bin/named
TOOLS               := $(CONTROL_PLANE_TOOLS) $(NEIGHBOUR_TOOLS)

.PHONY: tools ccm-source FORCE

tools: ## Build the pinned kube-apiserver, kubectl, etcd, helm, the Scaleway CCM, external-dns, Envoy Gateway and BIND's named into bin/.
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
    nice -n 10 $(GO) build -trimpath $(NO_DWARF) -ldflags="$$ldflags" -o "$$out.tmp" '$(3)' && \
  mv -f "$$out.tmp" "$$out" && echo "$$stamp" > "$$version_file"; \
fi
endef

KUBE_VERSION_LDFLAGS := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
  -X $(p).gitVersion=$$v -X $(p).gitMajor=$$major -X $(p).gitMinor=$$minor -X $(p).gitTreeState=clean)

bin/kube-apiserver: FORCE
	@$(call tool_build,$(TOOLS_DIR),k8s.io/kubernetes,k8s.io/kubernetes/cmd/kube-apiserver,$(KUBE_VERSION_LDFLAGS))

# kubectl drives the suites as users do (test/clients): the same
# Kubernetes release as the apiserver, so its apply and replace are that
# release's.
bin/kubectl: FORCE
	@$(call tool_build,$(TOOLS_DIR),k8s.io/kubernetes,k8s.io/kubernetes/cmd/kubectl,$(KUBE_VERSION_LDFLAGS))

# The node of make e2e: the same Kubernetes release as the apiserver. Built
# one at a time after kube-apiserver (whose packages they share; make test
# builds them beside its suites, see test): cold on 2
# cores, kubelet takes about 2 min, kube-controller-manager 1, kube-scheduler
# under half a minute. Not in TOOLS: make test's suites do not need them.
# bin/registry is CNCF Distribution's, which serves the chart and the image
# over OCI as the release workflow publishes them; bin/cosign is
# Sigstore's, which signs and verifies them there. Both come from the
# neighbours' module, after the CCM, whose packages they share.
E2E_TOOLS := bin/kubelet bin/kube-controller-manager bin/kube-scheduler bin/registry bin/cosign

bin/kubelet: FORCE
	@$(call tool_build,$(TOOLS_DIR),k8s.io/kubernetes,k8s.io/kubernetes/cmd/kubelet,$(KUBE_VERSION_LDFLAGS))

bin/kube-controller-manager: FORCE
	@$(call tool_build,$(TOOLS_DIR),k8s.io/kubernetes,k8s.io/kubernetes/cmd/kube-controller-manager,$(KUBE_VERSION_LDFLAGS))

bin/kube-scheduler: FORCE
	@$(call tool_build,$(TOOLS_DIR),k8s.io/kubernetes,k8s.io/kubernetes/cmd/kube-scheduler,$(KUBE_VERSION_LDFLAGS))

bin/registry: FORCE
	@$(call tool_build,$(NEIGHBOURS_DIR),github.com/distribution/distribution/v3,github.com/distribution/distribution/v3/cmd/registry,-X github.com/distribution/distribution/v3/version.version=$$v)

bin/cosign: FORCE
	@$(call tool_build,$(NEIGHBOURS_DIR),github.com/sigstore/cosign/v3,github.com/sigstore/cosign/v3/cmd/cosign,-X sigs.k8s.io/release-utils/version.gitVersion=$$v)

bin/etcd: FORCE
	@$(call tool_build,$(TOOLS_DIR),go.etcd.io/etcd/server/v3,go.etcd.io/etcd/server/v3,)

bin/helm: FORCE
	@$(call tool_build,$(TOOLS_DIR)/helm,helm.sh/helm/v4,helm.sh/helm/v4/cmd/helm,-X helm.sh/helm/v4/internal/version.version=$$v -X helm.sh/helm/v4/internal/version.gitTreeState=clean)

# external-dns, whose target annotation scw-lb-ipam writes: v0.22.0 from the
# module proxy (v0.23 needs Go 1.27), with the two replaces the neighbours'
# go.mod explains, its version stamped as its own Makefile does. It links
# every DNS provider's SDK.
bin/external-dns: FORCE
	@$(call tool_build,$(NEIGHBOURS_DIR),sigs.k8s.io/external-dns,sigs.k8s.io/external-dns,-X sigs.k8s.io/external-dns/pkg/apis/externaldns.Version=$$v)

# Envoy Gateway's controller, which the Gateway scenario (test/gateway) runs
# out of cluster: v1.9.1 from the module proxy. Its CRDs (Gateway API and
# Envoy Gateway's own) are copied from that module into
# bin/envoy-gateway-crds/ on every run (a copy, no build). Its version stamped
# as its own Makefile does.
bin/envoy-gateway: FORCE
	@$(call tool_build,$(NEIGHBOURS_DIR),github.com/envoyproxy/gateway,github.com/envoyproxy/gateway/cmd/envoy-gateway,-X github.com/envoyproxy/gateway/internal/cmd/version.envoyGatewayVersion=$$v)
	@cd '$(NEIGHBOURS_DIR)' && \
	  dir=$$(GOWORK=off GOFLAGS=-mod=readonly $(GO) mod download -json github.com/envoyproxy/gateway | sed -n 's/.*"Dir": "\(.*\)",/\1/p') && \
	  [ -d "$$dir/charts/gateway-helm/charts/crds/crds" ] && \
	  rm -rf '$(BIN)/envoy-gateway-crds' && mkdir -p '$(BIN)/envoy-gateway-crds' && \
	  find "$$dir/charts/gateway-helm/charts/crds/crds" -name '*.yaml' -exec cp -f {} '$(BIN)/envoy-gateway-crds/' \; && \
	  chmod u+w '$(BIN)'/envoy-gateway-crds/*.yaml

# actionlint checks .github/workflows in make lint; pinned in its own module.
bin/actionlint: FORCE
	@$(call tool_build,$(TOOLS_DIR)/actionlint,github.com/rhysd/actionlint,github.com/rhysd/actionlint/cmd/actionlint,-X github.com/rhysd/actionlint.version=$$v)

# goimports (import grouping) and staticcheck run in make lint; each pinned in
# its own module. staticcheck reports its version from the build info.
bin/goimports: FORCE
	@$(call tool_build,$(TOOLS_DIR)/goimports,golang.org/x/tools,golang.org/x/tools/cmd/goimports,)

bin/staticcheck: FORCE
	@$(call tool_build,$(TOOLS_DIR)/staticcheck,honnef.co/go/tools,honnef.co/go/tools/cmd/staticcheck,)

# The real Scaleway cloud-controller-manager, which the test worlds run
# beside the webhook, built from its own source at the one commit
# test/tools/ccm.version pins. It is not on the Go module proxy: the
# neighbours' module replaces it by bin/.ccm-src, a link to
# ../shared/scaleway-ccm when that folder holds the pinned commit (its
# PROVENANCE.md names it), else to a clone of the repository at that commit
# in bin/.ccm-clones, as on a machine with internet and nothing else. The
# source is read-only: the build writes nothing into it (-mod=readonly, no
# VCS stamping, the binary elsewhere). The stamp is the commit plus a hash
# of both go.mod files and the ldflags. The module selects the Kubernetes
# libraries the CCM pins (hack/ccm-source.sh checks it before each build).
# It is the first of the neighbours' module built; it shares no compiled
# package with kube-apiserver.
CCM_VERSION_FILE := $(TOOLS_DIR)/ccm.version
CCM_REPO         := https://github.com/scaleway/scaleway-cloud-controller-manager
CCM_MODULE       := github.com/scaleway/scaleway-cloud-controller-manager
CCM_SHARED       := $(abspath $(CURDIR)/../shared/scaleway-ccm)

bin/scaleway-cloud-controller-manager: FORCE
	@GO='$(GO)' hack/build-ccm.sh '$(abspath $@)' '$(CCM_VERSION_FILE)' '$(CCM_REPO)' '$(CCM_MODULE)' '$(CCM_SHARED)' '$(BIN)/.ccm-clones' '$(BIN)/.ccm-src' '$(NEIGHBOURS_DIR)'

# The link alone, and the check that the neighbours' module builds the CCM
# with the Kubernetes libraries it pins: what go mod tidy there needs.
ccm-source:
	@GO='$(GO)' hack/ccm-source.sh '$(BIN)/.ccm-src' '$(CCM_VERSION_FILE)' '$(CCM_REPO)' '$(CCM_SHARED)' '$(BIN)/.ccm-clones' '$(NEIGHBOURS_DIR)'

# named (BIND 9.18), the datacenter's DNS server in test/dns: Debian's (or
# Ubuntu's) bind9 and bind9-libs, and the libraries they depend on that are
# not installed, fetched with apt-get download and unpacked with dpkg -x into
# bin/bind: no service started, no file written outside bin/. bin/named runs
# it with those libraries on LD_LIBRARY_PATH. The stamp is the packages'
# versions, so a security release is fetched once it is the candidate.
# Cold: about 5 s (2 MB).
BIND_PACKAGES := bind9 bind9-libs

bin/named: FORCE
	@hack/fetch-named.sh '$(BIN)' $(BIND_PACKAGES)
