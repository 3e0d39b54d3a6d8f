package dstest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

func pool(name, cidr string) *v3.IPPool {
	return &v3.IPPool{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v3.IPPoolSpec{CIDR: cidr},
	}
}

func netset(ns, name string, labels map[string]string, nets ...string) *v3.NetworkSet {
	return &v3.NetworkSet{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindNetworkSet, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       v3.NetworkSetSpec{Nets: nets},
	}
}
