//go:build privileged

package lab

import "fmt"

// Pods of the default model: a on node0, b on node1, c on node2 in
// each of x, y and z.

// morePolicySetups: Kubernetes NetworkPolicy egress, ipBlock, named ports
// and pod+namespace peers; Calico nets and notPorts, port ranges, three
// tiers passing in turn, order ties, service-account names, a network set
// as an egress peer, staged policies over allowed and denied traffic, an
// egress tier passing to the profiles.
func morePolicySetups() []flowSetup {
	return []flowSetup{
		{"k8s-egress-deny-all", fixed(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: z-no-egress, namespace: z}
spec: {podSelector: {}, policyTypes: [Egress]}
`), []flowProbe{{"z/a", "x/b", "tcp/80", false}, {"x/a", "z/b", "tcp/80", true}}, ""},
		{"k8s-ipblock-except", func(l *Lab) string {
			return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: c-from-pods-except, namespace: x}
spec:
  podSelector: {matchLabels: {pod: c}}
  policyTypes: [Ingress]
  ingress: [{from: [{ipBlock: {cidr: 10.200.0.0/16, except: ["%s/32"]}}]}]
`, podIP(l, "y/b"))
		}, []flowProbe{{"y/b", "x/c", "tcp/80", false}, {"z/b", "x/c", "tcp/80", true}}, ""},
		{"k8s-named-port", fixed(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-81-by-name, namespace: "y"}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Ingress]
  ingress: [{from: [{namespaceSelector: {}}], ports: [{port: serve-81-tcp}]}]
`), []flowProbe{{"x/b", "y/a", "tcp/81", true}, {"x/b", "y/a", "tcp/80", false}}, ""},
		{"k8s-pod-and-namespace-peer", fixed(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: c-only-from-x-a, namespace: z}
spec:
  podSelector: {matchLabels: {pod: c}}
  policyTypes: [Ingress]
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: x}}, podSelector: {matchLabels: {pod: a}}}]}]
`), []flowProbe{{"x/a", "z/c", "tcp/80", true}, {"x/b", "z/c", "tcp/80", false}, {"y/a", "z/c", "tcp/80", false}}, ""},
		{"calico-nets-notports", func(l *Lab) string {
			return fmt.Sprintf(`apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: deny-yc-but-81, namespace: x}
spec:
  selector: all()
  ingress:
  - {action: Deny, protocol: TCP, source: {nets: ["%s/32"]}, destination: {notPorts: [81]}}
  - {action: Allow}
`, podIP(l, "y/c"))
		}, []flowProbe{{"y/c", "x/a", "tcp/80", false}, {"y/c", "x/a", "tcp/81", true}}, ""},
		{"global-port-range", fixed(`apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: y-79-80}
spec:
  selector: projectcalico.org/namespace == 'y'
  types: [Ingress]
  ingress: [{action: Allow, protocol: TCP, destination: {ports: ["79:80"]}}]
`), []flowProbe{{"x/a", "y/c", "tcp/80", true}, {"x/a", "y/c", "tcp/81", false}}, ""},
		{"three-tiers-pass", fixed(`apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: t-first}
spec: {order: 10}
---
apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: t-second}
spec: {order: 20}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: t-first.pass-z}
spec:
  tier: t-first
  selector: projectcalico.org/namespace == 'z'
  types: [Ingress]
  ingress: [{action: Pass}]
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: t-second.no-x}
spec:
  tier: t-second
  selector: projectcalico.org/namespace == 'z'
  types: [Ingress]
  ingress: [{action: Deny, source: {namespaceSelector: ns == 'x'}}, {action: Pass}]
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: from-y, namespace: z}
spec:
  selector: all()
  ingress: [{action: Allow, source: {namespaceSelector: ns == 'y'}}]
`), []flowProbe{{"x/a", "z/b", "tcp/80", false}, {"y/a", "z/b", "tcp/80", true}, {"z/a", "z/b", "tcp/80", false}}, ""},
		{"order-tie-by-name", fixed(`apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: aa-allow-80}
spec:
  order: 100
  selector: projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress: [{action: Allow, protocol: TCP, destination: {ports: [80]}}]
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: bb-deny-rest}
spec:
  order: 100
  selector: projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress: [{action: Deny}]
`), []flowProbe{{"y/a", "x/b", "tcp/80", true}, {"y/a", "x/b", "tcp/81", false}}, ""},
		{"service-account-names", fixed(`apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: sa-default-from-y, namespace: z}
spec:
  selector: all()
  types: [Ingress]
  ingress: [{action: Allow, source: {serviceAccounts: {names: [default]}, namespaceSelector: ns == 'y'}}]
`), []flowProbe{{"y/b", "z/a", "tcp/80", true}, {"x/b", "z/a", "tcp/80", false}}, ""},
		{"network-set-egress-peer", func(l *Lab) string {
			return fmt.Sprintf(`apiVersion: projectcalico.org/v3
kind: GlobalNetworkSet
metadata: {name: sink, labels: {role: sink}}
spec: {nets: ["%s/32"]}
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: no-sink, namespace: x}
spec:
  selector: all()
  types: [Egress]
  egress: [{action: Deny, destination: {selector: role == 'sink', namespaceSelector: global()}}, {action: Allow}]
`, podIP(l, "z/c"))
		}, []flowProbe{{"x/a", "z/c", "tcp/80", false}, {"x/a", "z/b", "tcp/80", true}}, ""},
		{"staged-k8s-over-allowed", fixed(`apiVersion: projectcalico.org/v3
kind: StagedKubernetesNetworkPolicy
metadata: {name: stage-deny-all, namespace: "y"}
spec: {stagedAction: Set, podSelector: {}, policyTypes: [Ingress]}
`), []flowProbe{{"x/a", "y/b", "tcp/80", true}, {"z/a", "y/c", "tcp/80", true}}, ""},
		{"staged-allow-over-denied", fixed(`apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: deny-z, namespace: x}
spec:
  order: 100
  selector: all()
  ingress: [{action: Deny, source: {namespaceSelector: ns == 'z'}}, {action: Allow}]
---
apiVersion: projectcalico.org/v3
kind: StagedNetworkPolicy
metadata: {name: allow-z-80, namespace: x}
spec:
  stagedAction: Set
  order: 50
  selector: all()
  types: [Ingress]
  ingress: [{action: Allow, protocol: TCP, source: {namespaceSelector: ns == 'z'}, destination: {ports: [80]}}]
`), []flowProbe{{"z/a", "x/b", "tcp/80", false}, {"z/a", "x/b", "tcp/81", false}}, ""},
		{"egress-tier-pass-to-profile", fixed(`apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: egress-guard}
spec: {order: 40}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: egress-guard.x-no-y-81}
spec:
  tier: egress-guard
  selector: projectcalico.org/namespace == 'x'
  types: [Egress]
  egress: [{action: Deny, protocol: TCP, destination: {namespaceSelector: ns == 'y', ports: [81]}}, {action: Pass}]
`), []flowProbe{{"x/b", "y/c", "tcp/81", false}, {"x/b", "y/c", "tcp/80", true}}, ""},
	}
}

// namespaceProfile is the lab's kns.<ns> profile (as kube-controllers
// writes it) with other rules and extra labels.
func namespaceProfile(ns, extraLabels, ingress, egress string) string {
	return fmt.Sprintf(`apiVersion: projectcalico.org/v3
kind: Profile
metadata: {name: kns.%[1]s}
spec:
  labelsToApply: {pcns.ns: "%[1]s", pcns.projectcalico.org/name: "%[1]s"%[2]s}
  ingress: %[3]s
  egress: %[4]s
`, ns, extraLabels, ingress, egress)
}

const allowAll = "[{action: Allow}]"

// profileSetups: namespace profiles deciding (their rules, on labels
// other endpoints inherit from their profiles) and a profile's labels
// read by a namespace selector; each restores the profile as the lab
// wrote it.
func profileSetups() []flowSetup {
	return []flowSetup{
		{"profile-ingress-rules", fixed(namespaceProfile("z", "", `[{action: Deny, source: {selector: pcns.ns == 'x'}}, {action: Allow}]`, allowAll)),
			[]flowProbe{{"x/a", "z/b", "tcp/80", false}, {"y/a", "z/b", "tcp/80", true}}, namespaceProfile("z", "", allowAll, allowAll)},
		{"profile-egress-rules", fixed(namespaceProfile("y", "", allowAll, `[{action: Deny, protocol: TCP, destination: {selector: pcns.ns == 'z', ports: [81]}}, {action: Allow}]`)),
			[]flowProbe{{"y/a", "z/c", "tcp/81", false}, {"y/a", "z/c", "tcp/80", true}}, namespaceProfile("y", "", allowAll, allowAll)},
		{"profile-labels-for-namespace-selector", fixed(namespaceProfile("x", ", pcns.team: red", allowAll, allowAll) + `---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: z-no-red-81}
spec:
  selector: projectcalico.org/namespace == 'z'
  types: [Ingress]
  ingress: [{action: Deny, protocol: TCP, source: {namespaceSelector: team == 'red'}, destination: {ports: [81]}}, {action: Allow}]
`), []flowProbe{{"x/a", "z/b", "tcp/81", false}, {"y/a", "z/b", "tcp/81", true}}, namespaceProfile("x", "", allowAll, allowAll)},
	}
}

// defaultAllow is Calico's projectcalico-default-allow profile (built in
// with the Kubernetes datastore; the etcd lab has none until applied).
const defaultAllow = `apiVersion: projectcalico.org/v3
kind: Profile
metadata: {name: projectcalico-default-allow}
spec: {ingress: [{action: Allow}], egress: [{action: Allow}]}
---
`

// hostEndpoint is a HostEndpoint of node (interface "*" or a name, the
// node's address expected) with the default allow profile, so that the
// node's own traffic is allowed unless a policy says otherwise.
func hostEndpoint(l *Lab, name, node, iface, label string) string {
	return fmt.Sprintf(`apiVersion: projectcalico.org/v3
kind: HostEndpoint
metadata: {name: %s, labels: {hep: %s}}
spec: {node: %s, interfaceName: "%s", expectedIPs: ["%s"], profiles: [projectcalico-default-allow]}
---
`, name, label, node, iface, endIP(l, node))
}

// hostEndpointSetups: host endpoints policing forwarded traffic (an
// all-interfaces one, ingress and egress; a named interface the flow
// crosses, which the trace places by the routes; preDNAT) and traffic to
// the node itself (a tier passing to the default allow profile). Their
// verdicts are counted; as in Calico, no flow names them: a flow is
// reported at workloads only, with their own policies.
func hostEndpointSetups() []flowSetup {
	return []flowSetup{
		{"hep-all-interfaces-forward-in", func(l *Lab) string {
			return defaultAllow + hostEndpoint(l, "node2-all", "node2", "*", "star") + `apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: star-fwd-no-x}
spec:
  selector: hep == 'star'
  applyOnForward: true
  types: [Ingress]
  ingress: [{action: Deny, source: {namespaceSelector: ns == 'x'}}, {action: Allow}]
`
		}, []flowProbe{{"x/a", "y/c", "tcp/80", false}, {"y/a", "y/c", "tcp/80", true}, {"x/c", "z/c", "tcp/80", true}}, ""},
		{"hep-named-interface-forward-in", func(l *Lab) string {
			return defaultAllow + hostEndpoint(l, "node1-eth0", "node1", "eth0", "eth0") + `apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: eth0-fwd-no-81}
spec:
  selector: hep == 'eth0'
  applyOnForward: true
  types: [Ingress]
  ingress: [{action: Deny, protocol: TCP, destination: {ports: [81]}}, {action: Allow}]
`
		}, []flowProbe{{"z/a", "z/b", "tcp/81", false}, {"z/a", "z/b", "tcp/80", true}, {"z/b", "x/b", "tcp/81", true}}, ""},
		{"hep-prednat", func(l *Lab) string {
			return defaultAllow + hostEndpoint(l, "node0-all", "node0", "*", "star0") + `apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: prednat-no-y-81}
spec:
  selector: hep == 'star0'
  preDNAT: true
  applyOnForward: true
  types: [Ingress]
  ingress: [{action: Deny, protocol: TCP, source: {namespaceSelector: ns == 'y'}, destination: {ports: [81]}}]
`
		}, []flowProbe{{"y/b", "x/a", "tcp/81", false}, {"y/b", "x/a", "tcp/80", true}, {"z/b", "x/a", "tcp/81", true}}, ""},
		{"hep-all-interfaces-forward-out", func(l *Lab) string {
			return defaultAllow + hostEndpoint(l, "node0-all-out", "node0", "*", "out0") + `apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: star-fwd-out-no-z-80}
spec:
  selector: hep == 'out0'
  applyOnForward: true
  types: [Egress]
  egress: [{action: Deny, protocol: TCP, destination: {namespaceSelector: ns == 'z', ports: [80]}}, {action: Allow}]
`
		}, []flowProbe{{"x/a", "z/b", "tcp/80", false}, {"x/a", "y/b", "tcp/80", true}, {"y/a", "z/b", "tcp/81", true}}, ""},
		{"hep-to-host-tier-pass-default-allow", func(l *Lab) string {
			return defaultAllow + hostEndpoint(l, "node2-eth0", "node2", "eth0", "host2") + fmt.Sprintf(`apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: hosts}
spec: {order: 30}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: hosts.guard}
spec:
  tier: hosts
  selector: hep == 'host2'
  types: [Ingress]
  ingress: [{action: Deny, protocol: TCP, source: {namespaceSelector: ns == 'z'}, destination: {ports: [%d]}}, {action: Pass}]
`, hostPort)
		}, []flowProbe{{"x/a", "node2", fmt.Sprintf("tcp/%d", hostPort), true}, {"z/a", "node2", fmt.Sprintf("tcp/%d", hostPort), false}}, ""},
	}
}
