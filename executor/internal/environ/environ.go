// Package environ builds the environment of the processes the executor
// starts (commands, bash sessions, the main command) and finds their
// executables in its PATH, as execvp would.
package environ

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Without drops the variables named name from env.
func Without(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Merge returns base with over applied (values replace), the added
// variables in name order.
func Merge(base []string, over map[string]string) []string {
	if len(over) == 0 {
		return base
	}
	env := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := over[k]; !ok {
			env = append(env, kv)
		}
	}
	keys := make([]string, 0, len(over))
	for k := range over {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+over[k])
	}
	return env
}

// WithDefaults returns a copy of env with each "K=V" of defaults added
// unless env sets K.
func WithDefaults(env []string, defaults ...string) []string {
	out := slices.Clone(env)
	for _, kv := range defaults {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(out, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			out = append(out, kv)
		}
	}
	return out
}

// DefaultPath is the PATH searched when env sets none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// LookPath resolves name like execvp, with the PATH of env; relative PATH
// entries and names with a slash are relative to cwd (the child's
// working directory), which os.StartProcess applies itself.
func LookPath(name string, env []string, cwd string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := DefaultPath
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			path = v
			break
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		cand := filepath.Join(dir, name)
		probe := cand
		if !filepath.IsAbs(probe) && cwd != "" {
			probe = filepath.Join(cwd, probe)
		}
		if fi, err := os.Stat(probe); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			if !filepath.IsAbs(cand) {
				cand = "./" + cand
			}
			return cand, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in PATH: %w", name, fs.ErrNotExist)
}
