package datastore

import "sort"

func keyLess(a, b Key) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

func sortUpdates(ups []Update) {
	sort.SliceStable(ups, func(i, j int) bool { return keyLess(ups[i].Key, ups[j].Key) })
}
