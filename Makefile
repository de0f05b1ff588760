# pleg_exporter — the one entry point: make run, make test.
SHELL     := /bin/bash
GO        ?= go
BIN       ?= pleg_exporter
VERSION   := $(shell cat VERSION)
REVISION  := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BRANCH    := $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
PKG_VER   := github.com/prometheus/common/version
LDFLAGS   := -s -w -X $(PKG_VER).Version=$(VERSION) -X $(PKG_VER).Revision=$(REVISION) \
             -X $(PKG_VER).Branch=$(BRANCH) -X $(PKG_VER).BuildUser=make \
             -X $(PKG_VER).BuildDate=$(shell date -u +%Y%m%d-%H:%M:%S)
TEST_TIMEOUT ?= 40m
# The sockets --runtime=auto probes (runtime/detect); make run falls back to a
# private containerd when none of them exists.
RUNTIME_SOCKETS := /run/containerd/containerd.sock /var/run/crio/crio.sock /var/run/cri-dockerd.sock /var/run/docker.sock
RUN_ARGS  ?=
# crictl for the cleanup test and the benchmarks: cri-tools, pinned.
CRICTL_VERSION := v1.37.0
CRICTL    := .tools/crictl
# The real kubelet the end-to-end tests run, and the kubectl of the same
# Kubernetes for the kustomize test: k8s.io/kubernetes from the module proxy,
# both from one go build (about 9 minutes on 2 cores; kubectl adds about
# one), cached by version. testenv.KubeletVersion names the same version.
KUBELET_VERSION := v1.37.2
KUBERNETES := .tools/kubernetes-$(KUBELET_VERSION)
KUBERNETES_CMDS := kubelet kubectl
KUBELET   := $(KUBERNETES)/kubelet
KUBECTL   := $(KUBERNETES)/kubectl
# The control plane of the same Kubernetes for the cluster tests, built
# after the kubelet from the same module copy and Go build cache (the
# packages they share compile once: about 5 more minutes on 2 cores), and
# etcd (go.etcd.io/etcd/server/v3; testenv.EtcdVersion names the same one).
CONTROL_PLANE_CMDS := kube-apiserver kube-controller-manager kube-scheduler
ETCD_VERSION := v3.7.4
ETCD      := .tools/etcd-$(ETCD_VERSION)/etcd
# The Prometheus Operator the cluster tests run, with its config reloader and
# CRDs (github.com/prometheus-operator/prometheus-operator; only v0.85.0 is
# served; cluster.OperatorVersion names the same one).
OPERATOR_VERSION := v0.85.0
OPERATOR  := .tools/prometheus-operator-$(OPERATOR_VERSION)
# The Prometheus the operator runs in the cluster tests: Debian's 2.42.0+ds
# has no Kubernetes service discovery. github.com/prometheus/prometheus
# v0.316.0 is Prometheus 3.16.0 (cluster.PrometheusVersion).
PROMETHEUS_VERSION := v3.16.0
PROMETHEUS_MODULE_VERSION := v0.316.0
PROMETHEUS_SERVER := .tools/prometheus-$(PROMETHEUS_VERSION)/prometheus
# kube-state-metrics for the cluster tests (kube_node_status_condition, which the kubernetes-mixin's KubeNodeNotReady reads).
KSM_VERSION := v2.20.0
KUBE_STATE_METRICS := .tools/kube-state-metrics-$(KSM_VERSION)/kube-state-metrics
# containerd 2.x beside Debian's 1.6: github.com/containerd/containerd/v2 from
# the module proxy, static, with its own runc shim (about 1.5 minutes on 2
# cores), cached by version. testenv.Containerd2Version names the same one.
CONTAINERD2_VERSION := v2.4.2
CONTAINERD2 := .tools/containerd-$(CONTAINERD2_VERSION)
# containerd 1.7, the runtime most nodes in the field run (EKS, AKS, GKE up
# to 1.32): github.com/containerd/containerd from the module proxy, built
# the same way (testenv.Containerd17Version names the same one).
CONTAINERD17_VERSION := v1.7.35
CONTAINERD17 := .tools/containerd-$(CONTAINERD17_VERSION)
# Helm for the chart's tests (lint, template, the schema): helm.sh/helm/v4
# from the module proxy, built once (about 2 minutes on 2 cores), cached by
# version.
HELM_VERSION := v4.3.2
HELM      := .tools/helm-$(HELM_VERSION)/helm
# Thanos for the fleet tests (sidecars, Query, Ruler over two Prometheus):
# github.com/thanos-io/thanos from the module proxy, built once after Helm
# (fleet.ThanosVersion names the same one). Its go.mod wants Go 1.26.10,
# newer than this machine's, so it builds with the Go release the module
# proxy serves for that (THANOS_TOOLCHAIN, fetched once into the module cache).
THANOS_VERSION := v0.42.5
THANOS    := .tools/thanos-$(THANOS_VERSION)/thanos
THANOS_TOOLCHAIN := go1.27.3
# Its release build tags (.promu.yml): without slicelabels its gRPC store API
# casts Prometheus' labels to its own in a layout they do not have, and the
# sidecar and Query panic on their first Series call.
THANOS_TAGS := netgo,slicelabels

.PHONY: all build release plot-overflow run deps deps-runtime lint vet fmt-check license-check funclen test test-unit checkmetrics mixin jsonnetfmt mixin-check image go-image clean

all: lint build test

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/pleg_exporter

## run: build and run against the node's runtime, or a private containerd when there is none.
run: build
	@found=; for s in $(RUNTIME_SOCKETS); do [ -S $$s ] && found=$$s && break; done; \
	if [ -n "$$found" ]; then \
		echo "make run: relisting through $$found; metrics on http://localhost:10391/metrics"; \
		./$(BIN) $(RUN_ARGS); \
	else \
		$(MAKE) --no-print-directory deps-runtime && \
		echo "make run: metrics on http://localhost:10391/metrics" && \
		$(GO) run ./internal/cmd/devruntime --dir .run/containerd -- ./$(BIN) $(RUN_ARGS); \
	fi

## deps: install the real components the tests need (Debian packages; root).
deps:
	bash scripts/install-deps.sh runtime docker prometheus tools kubelet

deps-runtime:
	bash scripts/install-deps.sh runtime

lint: vet fmt-check license-check funclen

vet:
	$(GO) vet ./...
	cd internal/cmd/fleetbench && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Every Go file starts with the Apache-2.0 header (LICENSE), as the
# Prometheus ecosystem's do.
## funclen: no function outside the tests longer than 80 lines.
funclen:
	@$(GO) run ./internal/cmd/funclen -max 80 $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.tools/*')

license-check:
	@out=$$(for f in $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'); do \
		head -n 2 "$$f" | grep -q 'Licensed under the Apache License, Version 2.0' || echo "$$f"; done); \
	if [ -n "$$out" ]; then echo "no license header (see any other .go file):"; echo "$$out"; exit 1; fi

## test: everything CI runs, on a clean machine.
# crictl (cri-tools, pinned, through the module proxy) runs the cleanup that
# diagnose prints against the private containerd; the containerd tests run on
# Debian's 1.6 and on containerd 2.x; Helm lints and renders the chart; the
# kubelet runs the end-to-end tests (scripts/test.sh runs the tests, those
# last).
test: kubernetes-background helm-background deps $(CRICTL) $(CONTAINERD2)/containerd $(CONTAINERD17)/containerd lint checkmetrics mixin-check
	GO=$(GO) TEST_TIMEOUT=$(TEST_TIMEOUT) CRICTL=$(CURDIR)/$(CRICTL) KUBERNETES=$(CURDIR)/$(KUBERNETES) \
		KUBELET=$(CURDIR)/$(KUBELET) KUBECTL=$(CURDIR)/$(KUBECTL) ETCD=$(CURDIR)/$(ETCD) PROMETHEUS_OPERATOR=$(CURDIR)/$(OPERATOR) \
		PROMETHEUS_SERVER=$(CURDIR)/$(PROMETHEUS_SERVER) KUBE_STATE_METRICS=$(CURDIR)/$(KUBE_STATE_METRICS) \
		CONTAINERD2=$(CURDIR)/$(CONTAINERD2) CONTAINERD17=$(CURDIR)/$(CONTAINERD17) HELM=$(abspath $(HELM)) \
		THANOS=$(abspath $(THANOS)) bash scripts/test.sh

# The builds only the later tests need start first, in the background at
# the lowest CPU priority, and run beside the package installs (mostly
# waiting on the disk), the lint and the other tests (mostly waiting on
# timers). One job builds, one after the other so the first is there
# soonest: Kubernetes' kubelet and kubectl (about 9 minutes cold on 2 cores),
# its control plane, and etcd; another Helm (about 2). scripts/test.sh waits
# for each binary before the tests that use it. Logs: $(KUBERNETES).log,
# $(HELM).log.
K8S_BUILDS = GO=$(GO) bash scripts/build-kubernetes.sh $(KUBELET_VERSION) $(KUBERNETES) $(KUBERNETES_CMDS) && \
	GO=$(GO) bash scripts/build-kubernetes.sh $(KUBELET_VERSION) $(KUBERNETES) $(CONTROL_PLANE_CMDS) && \
	GO=$(GO) NAME=etcd bash scripts/build-module.sh go.etcd.io/etcd/server/v3 $(ETCD_VERSION) $(dir $(ETCD)) . && \
	$(OPERATOR_BUILD) && $(PROMETHEUS_BUILD) && $(KSM_BUILD)
OPERATOR_BUILD = GO=$(GO) COPY=example/prometheus-operator-crd bash scripts/build-module.sh \
	github.com/prometheus-operator/prometheus-operator $(OPERATOR_VERSION) $(OPERATOR) ./cmd/operator ./cmd/prometheus-config-reloader
PROMETHEUS_BUILD = { [ -x $(PROMETHEUS_SERVER) ] || GOBIN=$(abspath $(dir $(PROMETHEUS_SERVER))) CGO_ENABLED=0 $(GO) install -trimpath \
	-ldflags "-s -w -X github.com/prometheus/common/version.Version=$(PROMETHEUS_VERSION:v%=%)" \
	github.com/prometheus/prometheus/cmd/prometheus@$(PROMETHEUS_MODULE_VERSION); }
KSM_BUILD = { [ -x $(KUBE_STATE_METRICS) ] || GOBIN=$(abspath $(dir $(KUBE_STATE_METRICS))) CGO_ENABLED=0 $(GO) install -trimpath \
	-ldflags "-s -w" k8s.io/kube-state-metrics/v2@$(KSM_VERSION); }
.PHONY: kubernetes-background helm-background
kubernetes-background:
	@if ! { $(foreach c,$(KUBERNETES_CMDS) $(CONTROL_PLANE_CMDS),[ -x $(KUBERNETES)/$(c) ] &&) [ -x $(ETCD) ] && [ -x $(OPERATOR)/prometheus-config-reloader ] && [ -x $(PROMETHEUS_SERVER) ] && [ -x $(KUBE_STATE_METRICS) ]; } && \
		! { [ -f $(KUBERNETES).pid ] && kill -0 $$(cat $(KUBERNETES).pid) 2>/dev/null; }; then \
		mkdir -p .tools; \
		echo "make test: building $(KUBERNETES_CMDS) $(CONTROL_PLANE_CMDS) $(KUBELET_VERSION), etcd $(ETCD_VERSION) the Prometheus Operator $(OPERATOR_VERSION), Prometheus $(PROMETHEUS_VERSION) and kube-state-metrics $(KSM_VERSION) in the background (log: $(KUBERNETES).log)"; \
		setsid nice -n 19 bash -c '$(K8S_BUILDS)' > $(KUBERNETES).log 2>&1 < /dev/null & \
		echo $$! > $(KUBERNETES).pid; \
	fi

helm-background:
	@if ! { [ -x $(HELM) ] && [ -x $(THANOS) ]; } && ! { [ -f $(HELM).pid ] && kill -0 $$(cat $(HELM).pid) 2>/dev/null; }; then \
		mkdir -p $(dir $(HELM)); \
		echo "make test: building Helm $(HELM_VERSION), then Thanos $(THANOS_VERSION), in the background (log: $(HELM).log)"; \
		setsid nice -n 19 $(MAKE) --no-print-directory $(HELM) $(THANOS) > $(HELM).log 2>&1 < /dev/null & \
		echo $$! > $(HELM).pid; \
	fi

test-unit:
	$(GO) test -short -count=1 ./cmd/... ./collector/... ./pleg/... ./runtime/... ./diagnose/... ./gc/... ./mixin/...

## checkmetrics: promtool's lint on the golden /metrics files.
checkmetrics:
	@for f in testdata/*.prom; do promtool check metrics < $$f || { echo "promtool check metrics: $$f"; exit 1; }; done

JSONNET_FMT := $(GO) tool jsonnetfmt -n 2 --max-blank-lines 2 --string-style s --comment-style s
MIXIN_SRC   := $(shell find mixin -name '*.libsonnet' -o -name '*.jsonnet')

## mixin: render alerts, recording rules and dashboards (committed; drift fails the tests).
mixin:
	$(GO) run ./internal/cmd/mixin-render

jsonnetfmt:
	$(JSONNET_FMT) -i $(MIXIN_SRC)

## mixin-check: promtool on the rendered rules and the mixin's unit tests.
mixin-check:
	promtool check rules mixin/generated/prometheus_alerts.yaml mixin/generated/prometheus_rules.yaml
	cd mixin/tests && promtool test rules *.yaml

## image: the container image, with plain docker build of the Dockerfile (multi-stage: Go builder, FROM scratch).
# GO_IMAGE is the builder; the Dockerfile's default (the official Go image) is
# pulled where it is missing. Offline: make go-image image GO_IMAGE=$(GO_IMAGE_LOCAL).
IMAGE ?= pleg-exporter:$(VERSION)
GO_IMAGE ?=
GO_IMAGE_LOCAL = pleg-exporter-go:$(shell $(GO) env GOVERSION | sed 's/^go//')
image:
	docker build $(if $(GO_IMAGE),--build-arg GO_IMAGE=$(GO_IMAGE)) --build-arg VERSION=$(VERSION) \
		--build-arg REVISION=$(REVISION) -t $(IMAGE) .

## go-image: a Go builder image from this machine's Go and module cache, for make image without a registry.
go-image:
	GO=$(GO) $(GO) run ./internal/cmd/goimage --tag $(GO_IMAGE_LOCAL)

clean:
	rm -rf $(BIN) .build .run

## release: reproducible linux/amd64 and linux/arm64 tarballs of this commit, with sha256sums.txt, in .build/release.
release:
	GO=$(GO) bash scripts/release.sh

## demo: the whole chain on loopback (containerd, exporter, Prometheus, Alertmanager), left running.
DEMO := .build/demo
$(DEMO): $(shell find internal cmd collector pleg runtime diagnose -name '*.go') go.mod
	@mkdir -p .build && $(GO) build -o $(DEMO) ./internal/cmd/demo

.PHONY: demo demo-stall demo-flood demo-unflood demo-down
demo: build $(DEMO)
	@bash scripts/install-deps.sh runtime prometheus
	@$(DEMO) up

demo-stall: $(DEMO)
	@$(DEMO) stall

demo-flood: $(DEMO)
	@$(DEMO) flood

demo-unflood: $(DEMO)
	@$(DEMO) unflood

demo-down: $(DEMO)
	@$(DEMO) down

$(CRICTL):
	GOBIN=$(CURDIR)/.tools $(GO) install sigs.k8s.io/cri-tools/cmd/crictl@$(CRICTL_VERSION)

$(KUBELET) $(KUBECTL):
	GO=$(GO) bash scripts/build-kubernetes.sh $(KUBELET_VERSION) $(KUBERNETES) $(KUBERNETES_CMDS)

.PHONY: control-plane
## control-plane: the kube-apiserver, kube-controller-manager, kube-scheduler, etcd, Prometheus Operator, Prometheus and
## kube-state-metrics the cluster tests run.
control-plane: $(KUBELET)
	GO=$(GO) bash scripts/build-kubernetes.sh $(KUBELET_VERSION) $(KUBERNETES) $(CONTROL_PLANE_CMDS)
	GO=$(GO) NAME=etcd bash scripts/build-module.sh go.etcd.io/etcd/server/v3 $(ETCD_VERSION) $(dir $(ETCD)) .
	$(OPERATOR_BUILD)
	$(PROMETHEUS_BUILD)
	$(KSM_BUILD)

$(CONTAINERD2)/containerd:
	GO=$(GO) bash scripts/build-containerd.sh $(CONTAINERD2_VERSION) $(CONTAINERD2)

$(CONTAINERD17)/containerd:
	GO=$(GO) bash scripts/build-containerd.sh $(CONTAINERD17_VERSION) $(CONTAINERD17)

$(HELM):
	GOBIN=$(abspath $(dir $(HELM))) CGO_ENABLED=0 $(GO) install -trimpath \
		-ldflags '-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)' helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)

$(THANOS):
	GO=$(GO) TOOLCHAIN=$(THANOS_TOOLCHAIN) TAGS=$(THANOS_TAGS) bash scripts/build-module.sh github.com/thanos-io/thanos $(THANOS_VERSION) $(dir $(THANOS)) ./cmd/thanos

## record-streaming: the real-kubelet run on containerd 2.4 with CRIListStreaming, rewriting the promtool test
## of its recorded series (root). RECORD_LONG=1 adds 5300 containers and the threshold (about 30 minutes);
## empty, the steps of make test (about 10 minutes).
RECORD_LONG ?=
.PHONY: record-streaming
record-streaming: deps $(KUBELET) $(CONTAINERD2)/containerd
	CI=1 PLEG_E2E_LONG=$(RECORD_LONG) RECORD_SERIES=$(CURDIR)/mixin/tests/recorded_streaming_test.yaml \
		KUBELET=$(CURDIR)/$(KUBELET) CONTAINERD2=$(CURDIR)/$(CONTAINERD2) \
		$(GO) test -count=1 -v -timeout 40m -run TestKubeletStreaming ./internal/e2e

## test-kubelets: TestCluster on each kubelet version, runtime and gates the field runs (KUBELET_CELLS), one after
## another, each run recorded and checked against its recording in testdata/kubelets, which make test replays (root;
## RECORD_UPDATE=1 rewrites a recording that changed).
# The staging modules of each version are v0.MINOR.PATCH on the module proxy.
# Every cell with a recording in testdata/kubelets (about 2 hours in all).
KUBELET_CELLS ?= $(foreach v,v1.34.4 v1.35.4 v1.36.3,$(v):$(CONTAINERD17_VERSION):default $(v):$(CONTAINERD17_VERSION):EventedPLEG=true) \
	v1.36.3:$(CONTAINERD2_VERSION):CRIListStreaming=true $(KUBELET_VERSION):$(CONTAINERD17_VERSION):default
RECORD_UPDATE ?=
.PHONY: test-kubelets
test-kubelets: deps control-plane $(HELM) $(CONTAINERD2)/containerd $(CONTAINERD17)/containerd
	GO=$(GO) RECORD_UPDATE=$(RECORD_UPDATE) KUBERNETES=$(CURDIR)/$(KUBERNETES) KUBECTL=$(CURDIR)/$(KUBECTL) ETCD=$(CURDIR)/$(ETCD) \
		PROMETHEUS_OPERATOR=$(CURDIR)/$(OPERATOR) PROMETHEUS_SERVER=$(CURDIR)/$(PROMETHEUS_SERVER) \
		KUBE_STATE_METRICS=$(CURDIR)/$(KUBE_STATE_METRICS) HELM=$(abspath $(HELM)) \
		CONTAINERD2=$(CURDIR)/$(CONTAINERD2) CONTAINERD17=$(CURDIR)/$(CONTAINERD17) \
		bash scripts/test-kubelets.sh $(KUBELET_CELLS)

## plot-overflow: the cluster test (a real control plane, kubelet, Helm, the Prometheus Operator), recording the
## overflow's timeline, drawn as docs/overflow.png (the README's picture; root, about 12 minutes).
plot-overflow: deps control-plane $(HELM)
	CI=1 PLEG_TIMELINE=$(CURDIR)/docs/overflow-timeline.json KUBERNETES=$(CURDIR)/$(KUBERNETES) KUBELET=$(CURDIR)/$(KUBELET) \
		KUBECTL=$(CURDIR)/$(KUBECTL) ETCD=$(CURDIR)/$(ETCD) PROMETHEUS_OPERATOR=$(CURDIR)/$(OPERATOR) \
		PROMETHEUS_SERVER=$(CURDIR)/$(PROMETHEUS_SERVER) KUBE_STATE_METRICS=$(CURDIR)/$(KUBE_STATE_METRICS) HELM=$(abspath $(HELM)) \
		$(GO) test -count=1 -v -timeout 40m -run 'TestCluster$$' ./internal/cluster
	$(GO) run ./internal/cmd/timeline docs/overflow-timeline.json docs/overflow.png

## bench: benchmarks at 1k/10k/100k containers; writes docs/benchmarks.md and docs/benchmarks.png.

.PHONY: bench
bench: $(CRICTL)
	$(GO) run ./internal/cmd/bench --crictl $(CRICTL) --out docs

## bench-relist: the relist's list part of this tree beside the revision before the lister refactor, on a private containerd of 3,000 containers (root).
.PHONY: bench-relist
bench-relist: deps-runtime
	GO=$(GO) bash scripts/bench-relist.sh

## bench-status: the status pass's runtime calls and CPU per relist at 0-1000 changed pods, beside the kubelet's.
.PHONY: bench-status
bench-status:
	$(GO) run ./internal/cmd/statusbench

## bench-gc: pleg_exporter gc against the crictl pipeline on a private containerd; writes docs/gc-benchmark.md (root).
.PHONY: bench-gc
bench-gc: deps-runtime $(CRICTL)
	$(GO) run ./internal/cmd/gcbench --crictl $(CURDIR)/$(CRICTL) --out docs/gc-benchmark.md

## bench-fleet: the mixin on one Prometheus at 1,000 and 5,000 simulated nodes with 6 hours stored, and through Thanos;
## writes docs/fleet.md (root; FLEET_NODES, FLEET_RUN, FLEET_HISTORY; about 2 hours with the defaults). Each run's result
## is kept in .build/fleetbench and reused while the parameters, rules and dashboards stay the same (FLEET_FRESH=1: none).
## Thanos runs at the largest size (FLEET_THANOS= : no Thanos run, for a first pass at a smaller size).
## FLEET_SAVED_ONLY=1 writes docs/fleet.md from the saved results alone, naming the runs not measured yet.
# internal/cmd/fleetbench is a module of its own: it writes the history as TSDB blocks with Prometheus' tsdb package,
# which the product's module does not depend on.
FLEET_NODES ?= 1000,5000
FLEET_RUN ?= 10m
FLEET_HISTORY ?= 6h
FLEET_FRESH ?=
FLEET_THANOS ?= 1
FLEET_SAVED_ONLY ?=
.PHONY: bench-fleet
bench-fleet: deps $(THANOS)
	cd internal/cmd/fleetbench && $(GO) run . --repo $(CURDIR) --nodes $(FLEET_NODES) --run $(FLEET_RUN) \
		--history $(FLEET_HISTORY) $(if $(FLEET_THANOS),--thanos $(abspath $(THANOS))) --out $(CURDIR)/docs/fleet.md \
		--results $(CURDIR)/.build/fleetbench $(if $(FLEET_FRESH),--fresh) $(if $(FLEET_SAVED_ONLY),--saved-only)
