package plugins

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ErrUnknown: no plugin has that name.
var ErrUnknown = errors.New("unknown plugin")

var (
	mu       sync.Mutex
	registry = map[string]Plugin{}
)

// Register makes a plugin known by its name; a plugin package calls it in
// its init. It panics on an invalid recipe or a name taken twice.
func Register(p Plugin) {
	r := p.Recipe()
	if r.Name != p.Name() {
		panic(fmt.Sprintf("plugin %s: its recipe is named %q", p.Name(), r.Name))
	}
	if err := r.Validate(); err != nil {
		panic(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := registry[p.Name()]; ok {
		panic(fmt.Sprintf("plugin %s registered twice", p.Name()))
	}
	registry[p.Name()] = p
}

// Lookup returns the named plugin.
func Lookup(name string) (Plugin, error) {
	mu.Lock()
	p, ok := registry[name]
	mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q: known plugins are %s", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	return p, nil
}

// Names lists the known plugins, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Select turns a comma-separated list ("jupyter,browser") into plugins,
// sorted by name, without duplicates. Empty input is no plugin.
func Select(list string) ([]Plugin, error) {
	out, unknown := add(nil, list)
	if len(unknown) > 0 {
		_, err := Lookup(unknown[0])
		return nil, err
	}
	return out, nil
}

// add adds to out the plugins of list, a comma-separated list of names,
// that out lacks, sorted by name, and returns the names the registry does
// not know.
func add(out []Plugin, list string) ([]Plugin, []string) {
	var unknown []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" || slices.ContainsFunc(out, func(p Plugin) bool { return p.Name() == n }) {
			continue
		}
		p, err := Lookup(n)
		if err != nil {
			unknown = append(unknown, n)
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Plugin) int { return strings.Compare(a.Name(), b.Name()) })
	return out, unknown
}

// Parse is Select for recipes: what `bothy build --plugins` installs.
func Parse(list string) ([]Recipe, error) {
	ps, err := Select(list)
	if err != nil {
		return nil, err
	}
	out := make([]Recipe, len(ps))
	for i, p := range ps {
		out[i] = p.Recipe()
	}
	return out, nil
}

// EagerSuffix marks a plugin started with the executor rather than on
// first use: "jupyter:eager".
const EagerSuffix = ":eager"

// ParseEnabled is Select for lists whose names may end in ":eager"
// ("jupyter:eager,browser"): the plugins, sorted by name, and the names
// to start eagerly.
func ParseEnabled(list string) ([]Plugin, []string, error) {
	var names, eager []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if base, ok := strings.CutSuffix(n, EagerSuffix); ok {
			n = base
			if !slices.Contains(eager, n) {
				eager = append(eager, n)
			}
		}
		names = append(names, n)
	}
	ps, err := Select(strings.Join(names, ","))
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(eager)
	return ps, eager, nil
}

// AddKnown adds to enabled (sorted by name, as Select returns) the plugins
// of list, a comma-separated list of names, that the registry knows and
// enabled lacks, and returns the result and the names it does not know:
// an image's own plugins (its io.bothy.runtime.plugins label), which a
// build by another bothy may name differently, are enabled where they
// can be and otherwise reported, never fatal.
func AddKnown(enabled []Plugin, list string) ([]Plugin, []string) {
	return add(slices.Clone(enabled), list)
}
