package plugin

import "github.com/containernetworking/cni/pkg/version"

// SupportedVersions are the CNI spec versions the plugin speaks.
var SupportedVersions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// About is the plugin's description for VERSION.
const About = "Tabby calico CNI plugin (Calico-compatible)"
