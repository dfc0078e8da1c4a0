package main

import (
	"fmt"
	"slices"
	"strings"
)

// psFilter is ps's --filter KEY=VALUE, as podman's and Docker's: filters
// of one key match if any matches, filters of different keys must all.
type psFilter map[string][]string

// psFilterKeys are the keys ps filters on, with what each matches.
var psFilterKeys = map[string]string{
	"id":       "an ID prefix",
	"name":     "a substring of the name",
	"label":    "a label KEY or KEY=VALUE",
	"status":   "created, running, paused, exited or dead; any state is listed then, as with -a",
	"ancestor": "the image, as given at run or by digest prefix",
	"network":  "the network mode: none, host, bridge, bridge:NAME, pasta, slirp4netns",
}

// parsePsFilters reads --filter values.
func parsePsFilters(values []string) (psFilter, error) {
	f := psFilter{}
	for _, v := range values {
		k, val, ok := strings.Cut(v, "=")
		if !ok || val == "" {
			return nil, fmt.Errorf("invalid --filter %q: want KEY=VALUE", v)
		}
		if _, known := psFilterKeys[k]; !known {
			return nil, fmt.Errorf("invalid --filter %q: unknown key %q (use %s)", v, k, psFilterHelp())
		}
		if k == "status" && !slices.Contains([]string{"created", "running", "paused", "exited", "dead"}, val) {
			return nil, fmt.Errorf("invalid --filter %q: status is created, running, paused, exited or dead", v)
		}
		f[k] = append(f[k], val)
	}
	return f, nil
}

// match reports whether the sandbox v passes every filter.
func (f psFilter) match(v psView) bool {
	for k, vals := range f {
		if !slices.ContainsFunc(vals, func(val string) bool { return matchOne(k, val, v) }) {
			return false
		}
	}
	return true
}

func matchOne(key, val string, v psView) bool {
	switch key {
	case "id":
		return strings.HasPrefix(v.Id, val)
	case "name":
		return slices.ContainsFunc(v.Names, func(n string) bool { return strings.Contains(n, val) })
	case "label":
		lk, lv, hasValue := strings.Cut(val, "=")
		got, ok := v.Labels[lk]
		return ok && (!hasValue || got == lv)
	case "status":
		return v.State == val
	case "ancestor":
		digest := strings.TrimPrefix(v.ImageID, "sha256:")
		return v.Image == val || strings.HasPrefix(digest, strings.TrimPrefix(val, "sha256:")) && len(strings.TrimPrefix(val, "sha256:")) >= 4
	case "network":
		return v.NetworkMode == val
	}
	return false
}

// psFilterHelp lists the keys for --filter's help.
func psFilterHelp() string {
	keys := make([]string, 0, len(psFilterKeys))
	for k := range psFilterKeys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(k + " (" + psFilterKeys[k] + ")")
	}
	return b.String()
}
