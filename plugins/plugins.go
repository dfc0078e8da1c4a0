package plugins

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ErrUnknown: no plugin has that name.
var ErrUnknown = errors.New("unknown plugin")

// Recipe is how one plugin's dependencies get into an image.
type Recipe struct {
	// Name is what --plugins names it by.
	Name string `json:"name"`
	// Description says what the plugin gives a sandbox.
	Description string `json:"description"`
	// Packages are Debian packages installed with apt-get
	// (--no-install-recommends), from the base image's own sources.
	Packages []string `json:"packages,omitempty"`
	// Run are shell commands (sh -c, as root, host network) run in order
	// after the packages are in.
	Run []string `json:"run,omitempty"`
	// Check is a shell command that exits 0 when the plugin's dependencies
	// are already present; its install is then skipped.
	Check string `json:"check"`
}

var registry = map[string]Recipe{}

func register(r Recipe) Recipe {
	if err := r.Validate(); err != nil {
		panic(err)
	}
	registry[r.Name] = r
	return r
}

var (
	namePattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	packagePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`) // Debian policy 5.6.1
)

// Validate checks that a recipe can be installed: a plain name, Debian
// package names that cannot inject shell syntax, a check command.
func (r Recipe) Validate() error {
	if !namePattern.MatchString(r.Name) {
		return fmt.Errorf("plugin name %q: want lower-case letters, digits and dashes", r.Name)
	}
	for _, p := range r.Packages {
		if !packagePattern.MatchString(p) {
			return fmt.Errorf("plugin %s: %q is not a Debian package name", r.Name, p)
		}
	}
	if strings.TrimSpace(r.Check) == "" {
		return fmt.Errorf("plugin %s: no check command", r.Name)
	}
	return nil
}

// Lookup returns the recipe of the named plugin.
func Lookup(name string) (Recipe, error) {
	r, ok := registry[name]
	if !ok {
		return Recipe{}, fmt.Errorf("%w %q: known plugins are %s", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	return r, nil
}

// Names lists the known plugins, sorted.
func Names() []string {
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Parse turns a comma-separated list ("jupyter,browser") into recipes,
// sorted by name, without duplicates. Empty input is no plugin.
func Parse(list string) ([]Recipe, error) {
	var out []Recipe
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" || slices.ContainsFunc(out, func(r Recipe) bool { return r.Name == n }) {
			continue
		}
		r, err := Lookup(n)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Recipe) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// aptEnv makes apt and dpkg quiet, non-interactive and runnable in a user
// namespace that maps only root: apt's download sandbox switches to the _apt
// user, which such a namespace does not have.
const aptEnv = "export DEBIAN_FRONTEND=noninteractive; APT='apt-get -q -y -o APT::Sandbox::User=root -o Dpkg::Use-Pty=0'"

// Cleanup removes what apt and dpkg leave that differs from one run to the
// next (package lists, caches, logs with timestamps), so that the same
// recipe gives the same layer.
const Cleanup = "rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial " +
	"/var/log/apt /var/log/dpkg.log /var/log/alternatives.log /var/cache/debconf/*-old /var/lib/dpkg/*-old " +
	"/var/cache/ldconfig/aux-cache; find / -xdev -name __pycache__ -path '*/dist-packages/*' -prune -exec rm -rf {} + 2>/dev/null; true"

// Install returns the shell script that installs the recipe.
func (r Recipe) Install() string {
	var b strings.Builder
	b.WriteString("set -eu\n")
	if len(r.Packages) > 0 {
		b.WriteString("command -v apt-get >/dev/null || { echo 'plugin " + r.Name + " installs Debian packages: the base image has no apt-get' >&2; exit 1; }\n")
		b.WriteString(aptEnv + "\n")
		b.WriteString("$APT update\n")
		b.WriteString("$APT install --no-install-recommends " + strings.Join(r.Packages, " ") + "\n")
	}
	for _, c := range r.Run {
		b.WriteString(c + "\n")
	}
	b.WriteString(Cleanup + "\n")
	return b.String()
}
