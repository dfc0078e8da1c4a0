package plugins

import (
	"fmt"
	"strings"
)

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

// validName: lower-case letters, digits and dashes, starting with a letter
// or digit, at most 32 bytes.
func validName(n string) bool {
	return n != "" && len(n) <= 32 && n[0] != '-' && strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// validPackage: a Debian package name (policy 5.6.1): lower-case letters,
// digits, '+', '-' and '.', at least two, starting with a letter or digit.
func validPackage(p string) bool {
	return len(p) >= 2 && strings.IndexByte("+-.", p[0]) < 0 && strings.Trim(p, "abcdefghijklmnopqrstuvwxyz0123456789+-.") == ""
}

// Validate checks that a recipe can be installed: a plain name, Debian
// package names that cannot inject shell syntax, a check command.
func (r Recipe) Validate() error {
	if !validName(r.Name) {
		return fmt.Errorf("plugin name %q: want lower-case letters, digits and dashes", r.Name)
	}
	for _, p := range r.Packages {
		if !validPackage(p) {
			return fmt.Errorf("plugin %s: %q is not a Debian package name", r.Name, p)
		}
	}
	if strings.TrimSpace(r.Check) == "" {
		return fmt.Errorf("plugin %s: no check command", r.Name)
	}
	return nil
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
