package selector

// PrefixLabels returns a copy of s with prefix added to every label key it
// names, as Calico's PrefixVisitor does when felix matches a rule's
// namespaceSelector against "pcns."-prefixed namespace labels or its
// serviceAccounts selector against "pcsa."-prefixed ones. The canonical
// form and UniqueID are those of the rewritten selector, so an ID built
// from it equals Calico's. has(k), comparisons and set tests are
// rewritten; all() and global() are unchanged.
func (s *Selector) PrefixLabels(prefix string) *Selector {
	root := prefixNode(s.root, prefix)
	canonical := root.String()
	return &Selector{root: root, canonical: canonical, id: uniqueID(canonical)}
}

func prefixNode(n node, prefix string) node {
	if n.key != "" {
		n.key = prefix + n.key
	}
	if n.kids != nil {
		kids := make([]node, len(n.kids))
		for i := range n.kids {
			kids[i] = prefixNode(n.kids[i], prefix)
		}
		n.kids = kids
	}
	return n
}
