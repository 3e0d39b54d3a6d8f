# Tabby build and test entry points. See README.md.
GO ?= go
BIN := bin
CONTROLLER_GEN := $(GO) tool controller-gen

.PHONY: all build test test-privileged test-integration kube-binaries test-all bench bench-cni bench-felix bench-scale bench-scale-calc bench-trace lab demo lint generate fuzz clean

all: build

## build: every binary into bin/
build:
	@mkdir -p $(BIN)
	@pkgs=$$($(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./... | grep -v /hack/); \
	if [ -n "$$pkgs" ]; then $(GO) build -o $(BIN)/ $$pkgs; fi

## test: unit tests (no root needed), with the race detector
test:
	$(GO) test -race -count=1 ./...

## test-privileged: only the kernel/netns/real-service tests (build tag
## "privileged", names TestPrivileged*); root only: they fail, never skip,
## without root
test-privileged: kube-binaries
	$(GO) test -race -count=1 -tags privileged -p 1 -run '^TestPrivileged' ./...

## test-integration: only the tests against real servers (etcd,
## kube-apiserver; build tag "integration"); builds the servers first
test-integration: kube-binaries
	$(GO) test -race -count=1 -tags integration -p 1 ./...

## kube-binaries: real kube-apiserver, kubectl and etcd from the Go module
## proxy, cached in ~/.cache/tabby-kube/bin (8 min cold, seconds warm)
kube-binaries:
	hack/build-kube-binaries.sh

## test-all: what CI runs: lint, then every test (unit, privileged and
## integration) once, with the race detector
test-all: lint kube-binaries
	$(GO) test -race -count=1 -tags privileged,integration -p 1 -timeout 30m ./...

## bench: benchmarks, printed
bench: kube-binaries
	$(GO) test -tags integration -run '^$$' -bench . -benchmem ./...

## bench-cni: ADD/DEL min/p50/p95 over 60 sequential pods, Tabby vs
## ptp + host-local from containernetworking/plugins, same run (root)
bench-cni: kube-binaries
	$(GO) test -tags privileged -run '^$$' -bench CNI -benchtime 60x ./cni-plugin/e2e/

## bench-felix: felix full sync vs the plain iptables-restore floor and a
## one-policy change at 1,000 policies / 500 local / 5,000 remote endpoints
## (root), plus the pure calc and render benchmarks
bench-felix:
	$(GO) test -tags privileged -run '^$$' -bench FelixSync -benchtime 3x ./felix/e2e/
	$(GO) test -tags privileged -run '^$$' -bench DaemonPolicyChange -benchtime 20x ./felix/e2e/
	$(GO) test -tags privileged -run '^$$' -bench PrivilegedOneChange -benchtime 30x ./felix/dataplane/
	$(GO) test -run '^$$' -bench . -benchmem ./felix/calc/ ./felix/rules/

## bench-scale: felix at cluster scale (issue 15, root): the real
## cmd/felix over a real etcd loaded with the synthetic cluster (1,000
## policies, 110 local endpoints) and 5,000 and 150,000 remote endpoints
## (TABBY_SCALE_SIZES=...), programming a test namespace: load time,
## start -> ready (median of 3 cold starts, TABBY_SCALE_STARTS=n) with
## felix's and etcd's CPU, RSS at ready and the peak, one remote endpoint added/removed -> its ipset
## member in the kernel (p50/max of 20), one policy changed -> its chain
## live (p50), 100 endpoint changes/s for 30 s (felix CPU, lag of the last
## change), each with the load average. bench-scale-calc: the pure
## calculation in-process (the Engine: one change, first load).
bench-scale:
	$(GO) test -tags privileged,integration -run '^$$' -bench PrivilegedScale -benchtime 1x -timeout 90m ./felix/e2e/

bench-scale-calc:
	TABBY_BENCH_SCALE=1 $(GO) test -run '^$$' -bench 'ScaleEngine(Endpoint|Policy)Change' -benchtime 20x ./felix/calc/
	TABBY_BENCH_SCALE=1 $(GO) test -run '^$$' -bench 'ScaleEngineLoad' -benchtime 2x ./felix/calc/

## bench-trace: calicoctl policy trace at 1,000 policies and 150,000
## workload endpoints (issue 26; goal < 100 ms): wall and CPU time per
## trace from the loaded datastore contents, with the load average
bench-trace:
	@uptime
	$(GO) test -run '^$$' -bench PolicyTrace -benchmem -benchtime 20x ./calicoctl/commands/

## lab: the first thing to run (root, Debian): installs what it needs
## (packages, the Go modules of the binaries the lab runs, etcd), builds
## those binaries, runs tabby-lab up (3 node namespaces with their agents,
## the upstream NetworkPolicy e2e pods), prints the connectivity matrix,
## applies the sample policy, prints it again and leaves the lab running
## (bin/tabby-lab down removes it). DATASTORE=kubernetes: the same on the
## real kube-apiserver (built first, ~8 min or more cold)
DATASTORE ?= etcd
lab:
	DATASTORE=$(DATASTORE) lab/make-lab.sh

## demo: the lab (make lab) tells the demo's story now; the old one-node
## demo stays runnable
demo: kube-binaries
	$(GO) run ./hack/demo

## fuzz: the selector, stored-records and CNI input fuzz targets, each for
## FUZZTIME (default 60s)
FUZZTIME ?= 60s
fuzz:
	$(GO) test ./api/selector/ -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	# Each run takes ~10 ms: minimising every new input for the default 60s would eat the budget.
	$(GO) test ./felix/storefuzz/ -run '^$$' -fuzz FuzzStoredRecords -fuzztime $(FUZZTIME) -fuzzminimizetime 5x
	$(GO) test ./cni-plugin/netconf/ -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./cni-plugin/plugin/ -run '^$$' -fuzz FuzzPluginInput -fuzztime $(FUZZTIME)

## lint: gofmt check + go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags privileged,integration ./...

## generate: deepcopy functions and CRDs from the API types, then
## manifests/tabby.yaml and tabby-etcd.yaml from manifests/parts
generate:
	rm -f manifests/crds/crd.projectcalico.org_*.yaml
	$(CONTROLLER_GEN) object paths=./api/v3/...
	$(CONTROLLER_GEN) object paths=./datastore/kdd/crdv1/...
	$(CONTROLLER_GEN) crd:allowDangerousTypes=true paths=./api/v3/... output:crd:artifacts:config=manifests/crds
	# Calico's stored forms of BlockAffinity and IPAMConfiguration replace
	# the ones made from api/v3 (crdpostprocess drops the rest Calico lacks).
	$(CONTROLLER_GEN) crd:allowDangerousTypes=true paths=./datastore/kdd/crdv1/... output:crd:artifacts:config=manifests/crds
	$(GO) run ./hack/crdpostprocess manifests/crds
	$(GO) run ./hack/manifestgen

clean:
	rm -rf $(BIN)
