// Package kdd is the Kubernetes-API backend of datastore.Client ("KDD",
// Calico's Kubernetes datastore), with the same semantics as the etcd
// backend (proven by datastore/dstest) and Calico's on-cluster format, so
// a cluster can move between Calico and Tabby.
//
// # Storage
//
// The CRDs are exactly Calico's (manifests/crds): each stored v3 kind is
// the crd.projectcalico.org/v1 custom resource of the same kind and
// plural, through client-go's dynamic client: objects are converted to and
// from unstructured via JSON, using the same Go types that generate the
// CRDs. Where Calico's stored form differs from the v3 type, storedform.go
// converts (the forms are in crdv1): IPAMConfiguration is ipamconfigs
// (kind IPAMConfig); a BlockAffinity's spec.deleted is a string and its CR
// carries Calico's lookup labels (projectcalico.org/hostname-hash,
// affinity-type, ip-version); status is stored only for CalicoNodeStatus
// and KubeControllersConfiguration. There are no CRDs for Node, Profile
// or WorkloadEndpoint (see below). The dynamic client was chosen over a
// hand-built REST client because it already speaks every CRD (paging,
// watch decoding, preconditions, status subresources) without per-kind
// code, and the dynamic informers the syncer needs come with it.
// Creates and updates ask for strict field validation, so a schema that
// drifted from the Go types fails loudly instead of pruning fields.
//
// As in Calico, the v3 metadata (labels, annotations, owner references,
// and for policies the v3 name) is kept in the projectcalico.org/metadata
// annotation rather than on the custom resource; the v3 UID is the CR's
// UID with its bits reversed (ConvertUID). The CR of a policy (Network,
// GlobalNetwork, and their Staged kinds) is named as the policy, in any
// tier (Calico v3.30 and later); one written by an older release as
// "default.<name>" without the annotation reads as <name>.
//
// A list of one node's BlockAffinities (datastore.ListOptions.Node) asks
// the API server for Calico's hostname-hash label only, so it costs
// O(node); IndexNode labels the node's affinities written by Calico before
// v3.31 (nodeindex.go). ListNames reads a kind's names from the objects'
// metadata only (names_list.go): a block claim needs no block's contents.
//
// Compare-and-swap is the API server's own optimistic concurrency: an
// update carries the read resourceVersion (409 -> ErrConflict), a delete
// carries resourceVersion and UID preconditions. A watch from a revision
// the server no longer has (410 Gone, "too old resource version") yields
// ErrRevisionGone; an unreachable or timing-out server an UnavailableError
// naming it. A request whose context has no deadline gets RequestTimeout.
//
// # Objects derived from native resources
//
// Like Calico's KDD, some kinds come (also) from Kubernetes' own objects;
// those objects are read-only through the client (ErrReadOnly, saying what
// to change instead):
//
//   - WorkloadEndpoint: one per networked pod ("<node>-k8s-<pod>-eth0");
//     there are no WorkloadEndpoint custom resources.
//   - Profile: "kns.<namespace>" per namespace, "ksa.<namespace>.<sa>" per
//     service account and the built-in "projectcalico-default-allow";
//     nothing else (Calico has no profiles CRD), so every Profile write is
//     refused.
//   - NetworkPolicy: "knp.default.<name>" per Kubernetes NetworkPolicy,
//     plus the NetworkPolicy custom resources.
//   - GlobalNetworkPolicy: "kcnp.<name>" per Kubernetes
//     ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2, in tier
//     kube-admin or kube-baseline), plus the custom resources. The
//     ClusterNetworkPolicy CRD may be absent: it then reads as none (its
//     watch looks again every minute).
//   - Node: the Kubernetes Node, its Calico fields in projectcalico.org/*
//     annotations; Update writes them back (compare-and-swap on the
//     Kubernetes Node), Create and Delete are refused.
//   - KubernetesEndpointSlice (v3.KindKubernetesEndpointSlice, not a
//     Calico kind): the discovery.k8s.io/v1 EndpointSlices as they are,
//     which felix follows for rules' services matches (as Calico's felix
//     does in Kubernetes mode).
//
// A kind with several sources has a revision that joins theirs with "/"
// in a fixed order; lists and watches combine the sources.
//
// The conversions (PodToWorkloadEndpoint, NamespaceToProfile,
// K8sNetworkPolicyToCalico, K8sNodeToCalico, ...) are pure functions.
//
// # Syncer
//
// NewSyncer builds a datastore.Syncer on client-go shared informers and a
// rate-limited work queue (see Syncer); the generic datastore.WatchSyncer
// also works over this client.
//
// client-go logs through klog; a main routes it to slog with
// klog.SetSlogLogger (this package changes no process-wide logging).
package kdd
