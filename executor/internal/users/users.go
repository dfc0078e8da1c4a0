// Package users resolves user specifications (NAME|UID[:GROUP|GID]) in
// the sandbox's own /etc/passwd and /etc/group. It runs in the executor,
// inside the sandbox, whose root is the image's: no path it opens can lead
// to the host's files, whatever symlinks the image holds.
package users

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/bothy-sandbox/bothy/executor/internal/environ"
	"github.com/bothy-sandbox/bothy/internal/passwd"
)

// Files are where Lookup reads; tests point them elsewhere.
var (
	PasswdFile = "/etc/passwd"
	GroupFile  = "/etc/group"
	UIDMap     = "/proc/self/uid_map"
	GIDMap     = "/proc/self/gid_map"
)

// ErrNoLookup: a request named a user, and the service was given no way
// to look users up.
var ErrNoLookup = errors.New("users cannot be looked up here")

// Resolve is the user a request names: def when it names none, nil (the
// executor's own) for root, else what lookup resolves spec to.
func Resolve(spec string, def *passwd.Cred, lookup func(string) (*passwd.Cred, error)) (*passwd.Cred, error) {
	switch {
	case spec == "":
		return def, nil
	case passwd.IsRoot(spec):
		return nil, nil
	case lookup == nil:
		return nil, ErrNoLookup
	}
	return lookup(spec)
}

// Lookup resolves spec, and checks that its ids are mapped in the
// executor's user namespace (a rootless sandbox with a single id maps only
// root).
func Lookup(spec string) (*passwd.Cred, error) {
	users, err := parseFile(PasswdFile, passwd.ParsePasswd)
	if err != nil {
		return nil, err
	}
	groups, err := parseFile(GroupFile, passwd.ParseGroup)
	if err != nil {
		return nil, err
	}
	c, err := passwd.Resolve(spec, users, groups)
	if err != nil {
		return nil, err
	}
	if err := checkMapped(UIDMap, "uid", c.UID); err != nil {
		return nil, err
	}
	if err := checkMapped(GIDMap, "gid", c.GID); err != nil {
		return nil, err
	}
	return &c, nil
}

func parseFile[T any](path string, parse func(io.Reader) ([]T, error)) ([]T, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	out, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// checkMapped reports an id the user namespace does not map.
func checkMapped(mapFile, kind string, id uint32) error {
	f, err := os.Open(mapFile)
	if err != nil {
		return nil // no user namespace information: let the kernel decide
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			continue
		}
		in, err1 := strconv.ParseUint(fs[0], 10, 32)
		n, err2 := strconv.ParseUint(fs[2], 10, 32)
		if err1 == nil && err2 == nil && uint64(id) >= in && uint64(id) < in+n {
			return nil
		}
	}
	return fmt.Errorf("%s %d is not mapped in the sandbox's user namespace (a rootless sandbox with a single id maps only root): give the user subordinate ids (/etc/subuid, /etc/subgid and newuidmap; docs/operator.md) or run as root", kind, id)
}

// SysCred is c as the credential of a process started by an executor
// running as euid; nil when it is the executor's own (root, no groups).
func SysCred(c *passwd.Cred) *syscall.Credential {
	if c == nil || (c.UID == uint32(os.Geteuid()) && c.GID == uint32(os.Getegid()) && len(c.Groups) == 0) {
		return nil
	}
	return &syscall.Credential{Uid: c.UID, Gid: c.GID, Groups: c.Groups}
}

// Env is env for a process run as c: HOME is the user's home when env's
// is unset or the sandbox's default (/root) and the user is not root, as
// Docker sets it; USER likewise when the user has a name.
func Env(env []string, c *passwd.Cred) []string {
	if c == nil || c.UID == 0 {
		return env
	}
	over := map[string]string{}
	if home, ok := lookup(env, "HOME"); !ok || home == "/root" {
		over["HOME"] = c.Home
	}
	if _, ok := lookup(env, "USER"); !ok && c.Name != "" {
		over["USER"] = c.Name
	}
	if len(over) == 0 {
		return env
	}
	return environ.Merge(env, over)
}

func lookup(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}
