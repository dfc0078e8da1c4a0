// Package passwd resolves a user specification (Docker's --user:
// NAME|UID[:GROUP|GID]) against an image's /etc/passwd and /etc/group.
// The files are the image's, hence untrusted: the parsers accept any bytes,
// bound what they read, and skip malformed lines. The caller opens the files
// where the image's root is the root (the executor, inside the sandbox), so
// that no symlink in the image can point it at the host's.
package passwd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxFile bounds what is read of a passwd or group file.
const MaxFile = 4 << 20

// maxID is the largest id a user namespace maps (2^32-2; 2^32-1 is "none").
const maxID = 1<<32 - 2

// ErrUnknown: a name is in neither file.
var ErrUnknown = errors.New("no such user or group")

// User is one line of /etc/passwd.
type User struct {
	Name     string
	UID, GID uint32
	Home     string
	Shell    string
}

// Group is one line of /etc/group.
type Group struct {
	Name    string
	GID     uint32
	Members []string
}

// Cred is what a specification resolves to: the ids a process runs with,
// its supplementary groups, and the user's name and home when known.
type Cred struct {
	UID, GID uint32
	Groups   []uint32
	Name     string // empty for a numeric uid not in /etc/passwd
	Home     string // "/" when unknown, as Docker does
}

// ParsePasswd reads passwd lines (name:pw:uid:gid:gecos:home:shell),
// skipping comments and malformed lines, at most MaxFile bytes.
func ParsePasswd(r io.Reader) ([]User, error) {
	var out []User
	err := eachLine(r, func(f []string) {
		if len(f) < 7 || f[0] == "" {
			return
		}
		uid, ok1 := parseID(f[2])
		gid, ok2 := parseID(f[3])
		if !ok1 || !ok2 {
			return
		}
		out = append(out, User{Name: f[0], UID: uid, GID: gid, Home: f[5], Shell: f[6]})
	})
	return out, err
}

// ParseGroup reads group lines (name:pw:gid:member,member...), skipping
// comments and malformed lines, at most MaxFile bytes.
func ParseGroup(r io.Reader) ([]Group, error) {
	var out []Group
	err := eachLine(r, func(f []string) {
		if len(f) < 4 || f[0] == "" {
			return
		}
		gid, ok := parseID(f[2])
		if !ok {
			return
		}
		g := Group{Name: f[0], GID: gid}
		for m := range strings.SplitSeq(f[3], ",") {
			if m = strings.TrimSpace(m); m != "" {
				g.Members = append(g.Members, m)
			}
		}
		out = append(out, g)
	})
	return out, err
}

func eachLine(r io.Reader, fn func([]string)) error {
	sc := bufio.NewScanner(io.LimitReader(r, MaxFile))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
			continue // NIS entries are not ours to follow
		}
		fn(strings.Split(line, ":"))
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return err
	}
	return nil
}

func parseID(s string) (uint32, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n > maxID {
		return 0, false
	}
	return uint32(n), true
}

// ValidSpec checks a specification's syntax (NAME|UID[:GROUP|GID]) without
// resolving it.
func ValidSpec(spec string) error {
	u, g, hasGroup := strings.Cut(spec, ":")
	if u == "" || (hasGroup && g == "") {
		return fmt.Errorf("invalid user %q: want NAME|UID[:GROUP|GID]", spec)
	}
	for _, part := range []string{u, g} {
		if strings.ContainsAny(part, ":\n\x00") || len(part) > 256 {
			return fmt.Errorf("invalid user %q: want NAME|UID[:GROUP|GID]", spec)
		}
	}
	return nil
}

// Resolve resolves spec as Docker does: a user name must be in users, a
// numeric uid need not be (it then has gid 0 unless a group is given); the
// group is the user's primary one unless given, by name (it must be in
// groups) or number; the supplementary groups are those that list the user
// by name, when no group was given.
func Resolve(spec string, users []User, groups []Group) (Cred, error) {
	if err := ValidSpec(spec); err != nil {
		return Cred{}, err
	}
	us, gs, hasGroup := strings.Cut(spec, ":")
	c := Cred{Home: "/"}
	var u *User
	if id, ok := parseID(us); ok {
		c.UID = id
		for i := range users {
			if users[i].UID == id {
				u = &users[i]
				break
			}
		}
	} else {
		for i := range users {
			if users[i].Name == us {
				u = &users[i]
				break
			}
		}
		if u == nil {
			return Cred{}, fmt.Errorf("user %q: %w in the image's /etc/passwd", us, ErrUnknown)
		}
		c.UID = u.UID
	}
	if u != nil {
		c.GID, c.Name = u.GID, u.Name
		if u.Home != "" {
			c.Home = u.Home
		}
	}
	if hasGroup {
		if id, ok := parseID(gs); ok {
			c.GID = id
		} else {
			found := false
			for _, g := range groups {
				if g.Name == gs {
					c.GID, found = g.GID, true
					break
				}
			}
			if !found {
				return Cred{}, fmt.Errorf("group %q: %w in the image's /etc/group", gs, ErrUnknown)
			}
		}
		return c, nil
	}
	if c.Name != "" {
		for _, g := range groups {
			if g.GID != c.GID && contains(g.Members, c.Name) && len(c.Groups) < 64 {
				c.Groups = append(c.Groups, g.GID)
			}
		}
	}
	return c, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// IsRoot reports whether spec names uid 0 with no other group: "root",
// "0", "0:0", "root:root".
func IsRoot(spec string) bool {
	u, g, _ := strings.Cut(spec, ":")
	return (u == "0" || u == "root") && (g == "" || g == "0" || g == "root")
}
