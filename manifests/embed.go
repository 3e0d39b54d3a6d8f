package manifests

import "embed"

// CRDs are the crd.projectcalico.org/v1 CustomResourceDefinitions
// (crds/*.yaml), for tools that install them themselves (tabby-lab).
//
//go:embed crds/*.yaml
var CRDs embed.FS
