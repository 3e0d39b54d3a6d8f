// Package calicocrds holds the test that every Tabby component (felix's
// and confd's syncers, calicoctl, the calico-ipam CNI plugin) runs against
// a kube-apiserver that has exactly Calico's CRD set installed, reading
// objects a Calico cluster wrote in Calico's own format.
package calicocrds
