package selector

import "testing"

// benchSelector is shaped like a typical policy selector after Calico's
// namespace scoping.
const benchSelector = `projectcalico.org/namespace == 'prod' && app in {'web', 'api', 'worker'} && !has(quarantine) && tier != 'debug'`

func benchLabels() map[string]string {
	return map[string]string{
		"projectcalico.org/namespace":      "prod",
		"projectcalico.org/orchestrator":   "k8s",
		"projectcalico.org/serviceaccount": "default",
		"app":                              "api",
		"tier":                             "backend",
		"pod-template-hash":                "5d8f7c9b6",
		"version":                          "v2",
		"team":                             "payments",
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchSelector); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvaluate(b *testing.B) {
	sel := MustParse(benchSelector)
	labels := benchLabels()
	if !sel.Evaluate(labels) {
		b.Fatal("benchmark selector should match")
	}
	b.ReportAllocs()
	for b.Loop() {
		sel.Evaluate(labels)
	}
}
