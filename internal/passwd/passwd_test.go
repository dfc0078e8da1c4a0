package passwd

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

const testPasswd = `root:x:0:0:root:/root:/bin/sh
# a comment
+nisuser::::::
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
bad:x:notanumber:1:::
short:x:5
nginx:x:101:101:nginx user:/nonexistent:/sbin/nologin
`

const testGroup = `root:x:0:
www-data:x:33:
nginx:x:101:
adm:x:4:nginx,www-data
staff:x:50: nginx 
`

func parse(t *testing.T) ([]User, []Group) {
	t.Helper()
	u, err := ParsePasswd(strings.NewReader(testPasswd))
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseGroup(strings.NewReader(testGroup))
	if err != nil {
		t.Fatal(err)
	}
	return u, g
}

func TestResolve(t *testing.T) {
	users, groups := parse(t)
	if len(users) != 3 {
		t.Fatalf("parsed %d users, want 3 (comments, NIS and malformed lines skipped): %+v", len(users), users)
	}
	for _, tc := range []struct {
		spec string
		want Cred
	}{
		{"nginx", Cred{UID: 101, GID: 101, Groups: []uint32{4, 50}, Name: "nginx", Home: "/nonexistent"}},
		{"101", Cred{UID: 101, GID: 101, Groups: []uint32{4, 50}, Name: "nginx", Home: "/nonexistent"}},
		{"nginx:adm", Cred{UID: 101, GID: 4, Name: "nginx", Home: "/nonexistent"}},
		{"1234", Cred{UID: 1234, GID: 0, Home: "/"}},
		{"1234:77", Cred{UID: 1234, GID: 77, Home: "/"}},
		{"root", Cred{UID: 0, GID: 0, Name: "root", Home: "/root"}},
		{"www-data:33", Cred{UID: 33, GID: 33, Name: "www-data", Home: "/var/www"}},
	} {
		got, err := Resolve(tc.spec, users, groups)
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.spec, err)
			continue
		}
		if got.UID != tc.want.UID || got.GID != tc.want.GID || !slices.Equal(got.Groups, tc.want.Groups) || got.Name != tc.want.Name || got.Home != tc.want.Home {
			t.Errorf("Resolve(%q) = %+v, want %+v", tc.spec, got, tc.want)
		}
	}
	for _, spec := range []string{"nosuch", "nginx:nosuch", "", ":1", "1:", "a:b:c", "bad", "short", "nisuser", "4294967295"} {
		if _, err := Resolve(spec, users, groups); err == nil {
			t.Errorf("Resolve(%q) succeeded, want an error", spec)
		}
	}
	if _, err := Resolve("nosuch", users, groups); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "/etc/passwd") {
		t.Errorf("unknown user: %v, want ErrUnknown naming /etc/passwd", err)
	}
}

func TestIsRoot(t *testing.T) {
	for spec, want := range map[string]bool{"root": true, "0": true, "0:0": true, "root:root": true, "0:5": false, "nginx": false, "": false} {
		if IsRoot(spec) != want {
			t.Errorf("IsRoot(%q) = %v", spec, !want)
		}
	}
}

// FuzzResolve: an image's passwd and group files are untrusted bytes; no
// input panics, and a resolution's uid is the one asked for when numeric.
func FuzzResolve(f *testing.F) {
	f.Add([]byte(testPasswd), []byte(testGroup), "nginx")
	f.Add([]byte("a:b:1:2:::\n"), []byte("g:x:9:a,a,a\n"), "a:g")
	f.Add([]byte(strings.Repeat("x", 70000)+"\nroot:x:0:0:::"), []byte{}, "0")
	f.Fuzz(func(t *testing.T, pw, gr []byte, spec string) {
		users, err := ParsePasswd(strings.NewReader(string(pw)))
		if err != nil {
			t.Fatal(err)
		}
		groups, err := ParseGroup(strings.NewReader(string(gr)))
		if err != nil {
			t.Fatal(err)
		}
		c, err := Resolve(spec, users, groups)
		if err != nil {
			return
		}
		if id, ok := parseID(strings.Split(spec, ":")[0]); ok && c.UID != id {
			t.Fatalf("Resolve(%q).UID = %d", spec, c.UID)
		}
		if len(c.Groups) > 64 {
			t.Fatalf("%d supplementary groups", len(c.Groups))
		}
	})
}
