package sandbox

import "slices"

func sortNewestFirst(list []*Sandbox) {
	slices.SortFunc(list, func(a, b *Sandbox) int { return b.Created.Compare(a.Created) })
}
