# Tabby build and test entry points. See README.md.
GO ?= go
BIN := bin
CONTROLLER_GEN := $(GO) tool controller-gen

.PHONY: all build image test-prereqs test test-privileged test-integration kube-binaries test-all bench bench-cni bench-felix bench-flowlogs bench-goldmane bench-typha bench-scale bench-scale-starts bench-scale-calc bench-trace lab demo lint generate fuzz clean vm-image test-vm cluster cluster-down bench-cluster bench-wireguard e2e-netpol e2e-netpol-sctp e2e-network e2e-cnp e2e-cnp-sctp chaos

all: build

## build: every binary into bin/
build:
	@mkdir -p $(BIN)
	@pkgs=$$($(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./... | grep -v /hack/); \
	if [ -n "$$pkgs" ]; then $(GO) build -o $(BIN)/ $$pkgs; fi

## image: the Tabby image as bin/tabby-image.tar (docker load, ctr images
## import), named docker.io/tabbynet/tabby:$(cat VERSION), with no Docker
## daemon: static binaries plus the Debian packages pinned in
## hack/imagebuild/debian.lock (cached in ~/.cache/tabby-image). The same
## commit and lock give the same digest, printed on the last line
image:
	@SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) $(GO) run ./hack/imagebuild -go $(GO)

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

## vm-image: the Debian root filesystem and kernel the VM tests boot
## (internal/vmtest), cached in ~/.cache/tabby-vm (~4 min cold, instant warm)
vm-image:
	hack/build-vm-image.sh

## test-vm: the VM tests (Debian's kernel under qemu: IPIP and what this
## machine's kernel lacks), with the lab on VMs (build tag vm: not in the
## suite, ~9 min more); root, ~20 min on 2 cores
test-vm: kube-binaries vm-image
	$(GO) test -race -count=1 -tags privileged,vm -p 1 -timeout 30m -v -run '^TestPrivileged(VM|LabVMs)' ./internal/vmtest/ ./lab/

## bench-wireguard: TCP throughput between pods on two VMs (Debian's
## kernel) over VXLAN, with WireGuard enabled live, and over VXLAN again
## once it is disabled live (same run), and what happens to a stream across
## each switch (survived or not, its longest stall); root, ~5-10 min
bench-wireguard: kube-binaries vm-image
	$(GO) test -count=1 -tags privileged,vm -p 1 -timeout 30m -v -run '^TestPrivilegedWireguardThroughputOnVMs$$' ./internal/vmtest/

## kube-binaries: real kube-apiserver, kubectl and etcd from the Go module
## proxy, cached in ~/.cache/tabby-kube/bin (8 min cold, seconds warm)
kube-binaries:
	hack/build-kube-binaries.sh

## test-prereqs: what the cluster, image and VM tests start from (each
## cached): the Kubernetes node binaries and the upstream e2e.test and
## ginkgo (~20 min more cold), Tabby's binaries with the loopback plugin,
## the image, the VM image
test-prereqs: kube-binaries
	hack/build-kube-binaries.sh e2e >/dev/null
	$(MAKE) --no-print-directory build image vm-image
	$(GO) build -o $(BIN)/ github.com/containernetworking/plugins/plugins/main/loopback

## test-all: what CI runs: lint, then every test (unit, privileged and
## integration) once, with the race detector
test-all: lint test-prereqs
	$(GO) test -race -count=1 -tags privileged,integration -p 1 -timeout 40m ./...

## bench: benchmarks, printed
bench: kube-binaries
	$(GO) test -tags integration -run '^$$' -bench . -benchmem ./...

## bench-cni: ADD/DEL min/p50/p95 over 60 sequential pods, Tabby vs
## ptp + host-local from containernetworking/plugins, same run (root); the
## calico plugin's ADD p50/p99 on etcd and on the Kubernetes datastore side
## by side (real etcd, real kube-apiserver, ABBA): 60 single ADDs, then 10
## bursts of 9 ADDs at once over 3 nodes each claiming a fresh block, with
## the Kubernetes/etcd p50 ratios (goal <= 1.5); then IPAM's ADD on the
## Kubernetes datastore at 10 and 1,000 nodes' affinities (API requests per
## ADD, p50/p99). The machine's load is printed before and after: the
## numbers mean little on a busy machine
bench-cni: kube-binaries
	@uptime
	$(GO) test -tags privileged -run '^$$' -bench 'CNI$$' -benchtime 60x ./cni-plugin/e2e/
	$(GO) test -tags privileged,integration -run '^$$' -bench CNIDatastores -benchtime 60x ./cni-plugin/e2e/
	$(GO) test -tags integration -run '^$$' -bench KDDClusterSize -benchtime 60x ./ipam/
	@uptime

## bench-felix: felix full sync vs the plain iptables-restore floor and a
## one-policy change at 1,000 policies / 500 local / 5,000 remote endpoints
## (root), each in both dataplane modes side by side (iptables, nftables),
## the request/response rate between two pods under those rules in both
## modes, the nftables library comparison, plus the pure calc and render
## benchmarks
bench-felix:
	$(GO) test -tags privileged -run '^$$' -bench FelixSync -benchtime 3x ./felix/e2e/
	$(GO) test -tags privileged -run '^$$' -bench DaemonPolicyChange -benchtime 20x ./felix/e2e/
	$(GO) test -tags privileged -run '^$$' -bench 'PrivilegedOneChange|NftLibrary' -benchtime 30x ./felix/dataplane/
	$(GO) test -tags privileged -run '^$$' -bench PacketRate -benchtime 1x ./felix/e2e/
	$(GO) test -run '^$$' -bench . -benchmem ./felix/calc/ ./felix/rules/

## bench-flowlogs: flow logs (issue 26, root): TCP throughput between two
## pods of a node with flow logs off and on (alternating rounds, same run)
## and the collector's CPU at 1,000 new connections/s; then between pods
## of two nodes, the real felix on each over etcd (ABBA rounds)
bench-flowlogs:
	@uptime
	$(GO) test -tags privileged -run '^$$' -bench 'PrivilegedFlowLogs$$' -benchtime 1x ./felix/e2e/
	$(GO) test -tags privileged,integration -run '^$$' -bench PrivilegedFlowLogsTwoNodes -benchtime 1x ./felix/e2e/
	@uptime

## bench-goldmane: the flow page's first load with 10,000 flows in
## Debian's headless Chromium (navigation to every row painted, the list
## call as the page sees it), Flows.List over gRPC (all 10,000; a page of
## 100 denied) and the store's List alone, with the load average
bench-goldmane:
	@uptime
	$(GO) test -run '^$$' -bench 'PageFirstLoad10k' -benchtime 5x ./goldmane/web/
	$(GO) test -run '^$$' -bench 'ListGRPC10k|StoreList10k' -benchtime 20x ./goldmane/web/

## bench-typha: Typha fan-out (issue 33) on a real kube-apiserver: 1,000
## simulated nodes (felix's and confd's own syncer clients) through 3 Typha
## processes, then 1,000 direct (~2 min at load 5; the direct phase holds
## ~22,000 watches: TABBY_BENCH_TYPHA_DIRECT=300 on a busy machine,
## TABBY_BENCH_TYPHA_NODES likewise), same run: API server watches, CPU and memory, a policy change to every felix
## (p50/p99), a new node's time to in-sync, Typha's memory per connection
bench-typha: kube-binaries
	$(GO) test -tags integration -run '^$$' -bench TyphaFanout -benchtime 1x -timeout 30m ./typha/e2e/

## bench-scale: felix at cluster scale (issue 15, root): the real
## cmd/felix over a real etcd loaded with the synthetic cluster (1,000
## policies, 110 local endpoints) and 5,000 and 150,000 remote endpoints
## (TABBY_SCALE_SIZES=...), programming a test namespace: load time,
## start -> ready (median of 3 cold starts, TABBY_SCALE_STARTS=n) with
## felix's and etcd's CPU, RSS at ready and the peak, one remote endpoint added/removed -> its ipset
## member in the kernel (p50/max of 20), one policy changed -> its chain
## live (p50), 100 endpoint changes/s for 30 s (felix CPU, lag of the last
## change), each with the load average; every size in both dataplane modes
## (remote=N/iptables, remote=N/nftables). bench-scale-calc: the pure
## calculation in-process (the Engine: one change, first load).
bench-scale:
	$(GO) test -tags privileged,integration -run '^$$' -bench PrivilegedScale -benchtime 1x -timeout 90m ./felix/e2e/

## bench-scale-starts: start -> ready in both dataplane modes under the
## same conditions (one etcd at 150,000 remote endpoints, cold starts
## alternating iptables/nftables ABBA, TABBY_SCALE_STARTS pairs)
bench-scale-starts:
	$(GO) test -tags privileged,integration -run '^$$' -bench PrivilegedScaleStarts -benchtime 1x -timeout 60m ./felix/e2e/

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

## cluster: a real Kubernetes cluster on this machine (root): the
## Kubernetes node binaries (hack/build-kube-binaries.sh node, cached),
## Tabby's binaries and image, then `tabby-lab cluster up` (an existing
## cluster is removed first): a control plane and 3 nodes (kubelet,
## containerd, kube-proxy) in namespaces, Tabby installed with kubectl
## apply -f manifests/tabby.yaml. Prints each step's time. Then
## eval "$$(bin/tabby-lab cluster env)"; kubectl get pods -A.
## CLUSTER_ARGS="--datastore etcdv3" for tabby-etcd.yaml,
## "--pool-mode bgp|vxlan-crosssubnet", "--nodes N".
CLUSTER_ARGS ?=
cluster:
	@t0=$$(date +%s); \
	hack/install-packages.sh && \
	hack/build-kube-binaries.sh node >/dev/null && t1=$$(date +%s) && echo "kube binaries (hack/build-kube-binaries.sh node): $$((t1 - t0))s" && \
	$(MAKE) --no-print-directory build image >/dev/null && $(GO) build -o $(BIN)/ github.com/containernetworking/plugins/plugins/main/loopback && \
	t2=$$(date +%s) && echo "make build image: $$((t2 - t1))s" && \
	$(BIN)/tabby-lab cluster down >/dev/null && \
	$(BIN)/tabby-lab cluster up $(CLUSTER_ARGS) && \
	echo "make cluster: $$(( $$(date +%s) - t0 ))s in all"

## cluster-down: removes the cluster (also after a crash)
cluster-down:
	$(BIN)/tabby-lab cluster down

## bench-cluster: on one cluster (root), per pool mode (VXLAN, VXLAN
## CrossSubnet, BGP), a pod created with kubectl on node-1 -> its first
## successful connection from a pod on node-2: p50/p99 over 50 pods
## (TABBY_BENCH_PODS), where the time goes (kubectl, scheduler, kubelet,
## sandbox, CNI ADD, container start, felix's policy, the app) and the
## load average
bench-cluster:
	hack/build-kube-binaries.sh node >/dev/null
	$(MAKE) --no-print-directory build image >/dev/null
	$(GO) test -tags privileged -run '^$$' -bench PrivilegedClusterPodReady -benchtime 1x -timeout 60m ./lab/cluster/

## e2e-netpol: the upstream Kubernetes NetworkPolicy e2e ([sig-network]
## Netpol, e2e.test built from the module proxy by
## hack/build-kube-binaries.sh e2e, cached) on a fresh cluster per
## datastore (kubernetes, then etcdv3 with kube-controllers), each brought
## down at the end; prints "N passed, N failed, N skipped" per datastore and
## in all, and the duration (hack/e2e-cluster.sh: E2E_DATASTORES, E2E_ARGS,
## TABBY_CLUSTER_STATE)
e2e-netpol:
	hack/e2e-cluster.sh

## e2e-netpol-sctp: the NetworkPolicy e2e's 3 SCTP specs
## ([Feature:SCTPConnectivity]; this machine's kernel has no SCTP) on a fresh
## cluster per datastore with one node that is a qemu VM on Debian's kernel
## (--vm-nodes 1, TCG; vm-image), the namespace nodes tainted for the run;
## prints `tabby-lab cluster vm-check`'s connections, "N passed, N failed,
## N skipped" per datastore and in all, and the duration
## (hack/e2e-cluster.sh: E2E_DATASTORES, E2E_ARGS)
e2e-netpol-sctp:
	E2E_SUITE=netpol-sctp hack/e2e-cluster.sh

## e2e-network: the upstream [sig-network] [Conformance] specs (the same
## e2e.test) on a fresh cluster with CoreDNS as its DNS (built from its Go
## module by hack/build-coredns.sh, cached), on the Kubernetes datastore
## unless E2E_DATASTORES says otherwise; prints "N passed, N failed, N
## skipped" and the duration (hack/e2e-cluster.sh)
e2e-network:
	E2E_SUITE=network E2E_DATASTORES="$${E2E_DATASTORES:-kubernetes}" hack/e2e-cluster.sh

## e2e-cnp: kubernetes-sigs/network-policy-api's ClusterNetworkPolicy
## conformance suite (built from the module proxy at go.mod's version by
## hack/build-cnp-conformance.sh, cached) on a fresh cluster per datastore,
## each brought down at the end; prints "N passed, N failed, N skipped" per
## datastore and in all, the skips' reasons and the duration
## (hack/e2e-cnp.sh: E2E_DATASTORES, CNP_RUN, TABBY_CLUSTER_STATE)
e2e-cnp:
	hack/e2e-cnp.sh

## e2e-cnp-sctp: the ClusterNetworkPolicy conformance tests with SCTP (the
## 4 SCTP-only ones e2e-cnp skips, the 4 mixed ones whose SCTP pokes it
## leaves out) on a fresh cluster per datastore with two qemu VM nodes on
## Debian's kernel, the namespace node tainted so every pod runs on them
## (hack/e2e-cnp.sh with CNP_SCTP=1: E2E_DATASTORES, CNP_RUN)
e2e-cnp-sctp:
	CNP_SCTP=1 hack/e2e-cnp.sh

## chaos: faults on a fresh cluster under churn (issue 32, root): 1,000
## pod creations and deletions (TABBY_CHAOS_PODS) through the API while, in
## turn, calico-node is killed with kill -9 and deleted with kubectl, a
## node loses its power and gets it back, etcd and kube-apiserver stop for
## 30 s, the DaemonSet rolls to a new tag and back, a node is drained,
## deleted and re-added; an observer checks throughout (no address on two
## live pods, a TCP stream between two other nodes, a default-deny
## namespace probed every 100 ms) and for leaks after each fault. Prints
## each fault's figures, ends with one line per invariant, exits non-zero
## on a violation (hack/chaos.sh: CHAOS_ARGS, CLUSTER_ARGS,
## TABBY_CLUSTER_STATE)
chaos:
	hack/chaos.sh

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
## manifests/tabby.yaml and tabby-etcd.yaml from manifests/parts, and the
## Goldmane API's Go code from goldmane/proto/api.proto
generate:
	rm -f manifests/crds/crd.projectcalico.org_*.yaml
	$(CONTROLLER_GEN) object paths=./api/v3/...
	$(CONTROLLER_GEN) object paths=./datastore/kdd/crdv1/...
	$(CONTROLLER_GEN) crd:allowDangerousTypes=true paths=./api/v3/... output:crd:artifacts:config=manifests/crds
	# Calico's stored forms of BlockAffinity and IPAMConfiguration replace
	# the ones made from api/v3 (crdpostprocess drops the rest Calico lacks).
	$(CONTROLLER_GEN) crd:allowDangerousTypes=true paths=./datastore/kdd/crdv1/... output:crd:artifacts:config=manifests/crds
	$(GO) run ./hack/crdpostprocess manifests/crds
	# Kubernetes' ClusterNetworkPolicy CRD, as Calico ships it: network-policy-api's standard channel.
	cat "$$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/network-policy-api)/config/crd/standard/policy.networking.k8s.io_clusternetworkpolicies.yaml" \
		> manifests/crds/policy.networking.k8s.io_clusternetworkpolicies.yaml
	$(GO) run ./hack/manifestgen
	# The Goldmane API (Calico's wire names): protoc from Debian's
	# protobuf-compiler, its Go plugins from the modules go.mod pins.
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
	cd goldmane/proto && protoc --plugin=protoc-gen-go=../../$(BIN)/protoc-gen-go --plugin=protoc-gen-go-grpc=../../$(BIN)/protoc-gen-go-grpc \
		--go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative api.proto

clean:
	rm -rf $(BIN)
