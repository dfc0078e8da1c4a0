package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// treeDesc describes the tree below root like snapshot, without times and
// tolerating directories the caller cannot read.
func treeDesc(t testing.TB, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		if err != nil {
			m[rel] += " unreadable"
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o", st.Mode)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case unix.S_IFCHR, unix.S_IFBLK:
			desc += fmt.Sprintf(" rdev=%d nlink=%d", st.Rdev, st.Nlink)
		default:
			desc += fmt.Sprintf(" size=%d nlink=%d", st.Size, st.Nlink)
		}
		m[rel] = desc + m[rel]
		return nil
	})
	if err != nil {
		t.Fatalf("describe %s: %v", root, err)
	}
	return m
}

// FuzzUnpack feeds arbitrary bytes to Unpack as a layer. Properties: no
// panic, nothing outside dest changes, the result can be removed, and the
// openat2 and user-space resolvers agree.
func FuzzUnpack(f *testing.F) {
	f.Add(mkTar(f,
		symlink("a", "../sentinel"), reg("a/canary", "pwned", 0o644),
		symlink("b", "/"), reg("b/x", "x", 0o644), symlink("c", "b/../../sentinel/sub"), reg("c/passwd", "p", 0o644),
	))
	f.Add(mkTar(f,
		reg("f", "data", 0o4755), hardlink("g", "f"), hardlink("h", "../sentinel/canary"),
		symlink("s", "../sentinel"), hardlink("i", "s/canary"),
	))
	f.Add(mkTar(f,
		reg(".wh.x", "", 0), dirEnt("d/", 0o555), reg("d/.wh..wh..opq", "", 0), reg("d/f", "f", 0o400),
		symlink("proc", "/"), device('3', "dev/null", 1, 3), device('6', "fifo", 0, 0),
	))
	f.Add(mkTar(f,
		dirEnt("d/", 0o755), reg("d/x", "x", 0o644), reg("d", "file", 0o644), symlink("d", "d"),
		dirEnt("d/", 0o000), reg("/abs/../x", "x", 0o644),
	))
	f.Fuzz(checkUnpack)
}

// checkUnpack unpacks data as a layer with both resolvers and checks the
// fuzz properties.
func checkUnpack(t *testing.T, data []byte) {
	ctx := context.Background()
	opts := UnpackOptions{Rootless: true}
	s := newSandbox(t)
	errA := unpack(ctx, bytes.NewReader(data), s.dest, opts, false)
	s.checkHost(t)
	treeA := treeDesc(t, s.dest)
	if err := removeTree(s.dest); err != nil {
		t.Fatalf("remove unpacked layer: %v", err)
	}
	if err := os.Mkdir(s.dest, 0o755); err != nil {
		t.Fatal(err)
	}
	errB := unpack(ctx, bytes.NewReader(data), s.dest, opts, true)
	s.checkHost(t)
	if (errA == nil) != (errB == nil) {
		t.Fatalf("openat2 resolver: %v; user-space walk: %v", errA, errB)
	}
	if errA == nil {
		if d := diffSnap(treeA, treeDesc(t, s.dest)); d != "" {
			t.Fatalf("resolvers disagree:\n%s", d)
		}
	}
}

var (
	fuzzNames   = []string{"a", "b", "proc", "dev", "pts", "sentinel", "canary", "", ".wh.a", ".wh..wh..opq", "sub", "."}
	fuzzTargets = []string{"a", "b", "..", "/", "proc", "dev", "sentinel", "canary", "", "sub", "."}
)

func fuzzPath(x uint16, alphabet []string) string {
	n := int(x%3) + 1
	x /= 3
	parts := make([]string, n)
	for i := range parts {
		parts[i] = alphabet[int(x)%len(alphabet)]
		x /= uint16(len(alphabet))
	}
	return strings.Join(parts, "/")
}

// FuzzUnpackEntries reads the fuzz input as a list of tar entries over a
// small alphabet of names (symlinks, hardlinks, whiteouts, mount points,
// the sentinel's name), which reaches far more interesting layers than
// mutating tar bytes.
func FuzzUnpackEntries(f *testing.F) {
	f.Add([]byte("\x02\x10\x00\x05\x01\x01\x00\x00\x00\x00"))
	f.Add([]byte("\x00\x03\x00\x00\x00\x02\x04\x00\x0b\x02\x03\x07\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, program []byte) {
		var ents []tarEntry
		for i := 0; i+5 <= len(program) && len(ents) < 64; i += 5 {
			op := program[i]
			name := fuzzPath(uint16(program[i+1])|uint16(program[i+2])<<8, fuzzNames)
			target := fuzzPath(uint16(program[i+3])|uint16(program[i+4])<<8, fuzzTargets)
			if op&0x80 != 0 {
				name = "/" + name
			}
			switch op % 6 {
			case 0:
				mode := int64(0o755)
				if op&0x40 != 0 {
					mode = 0o500
				}
				ents = append(ents, dirEnt(name, mode))
			case 1:
				ents = append(ents, reg(name, target, 0o644))
			case 2:
				ents = append(ents, symlink(name, target))
			case 3:
				ents = append(ents, hardlink(name, fuzzPath(uint16(program[i+3])|uint16(program[i+4])<<8, fuzzNames)))
			case 4:
				ents = append(ents, device(tar.TypeFifo, name, 0, 0))
			case 5:
				ents = append(ents, device(tar.TypeChar, name, 1, 3))
			}
		}
		data, err := buildTar(ents...)
		if err != nil {
			t.Skip(err)
		}
		checkUnpack(t, data)
	})
}

// FuzzOverlayOptions checks that the escaping round-trips through a model of
// the kernel's parser and that no path can inject an option.
func FuzzOverlayOptions(f *testing.F) {
	f.Add("/a", "/b", "/u")
	f.Add(`/x:y,z`, `/b\`, `/u\,lowerdir=/etc`)
	f.Add("/a::b", ":", ",userxattr")
	f.Fuzz(func(t *testing.T, a, b, u string) {
		work := "/w" + u
		data, err := OverlayOptions([]string{a, b}, u, work, false)
		if err != nil {
			if !errors.Is(err, ErrInvalidOverlay) && !errors.Is(err, ErrOptionsTooLong) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		lowers, opts := parseOverlayData(data)
		if !reflect.DeepEqual(lowers, []string{a, b}) {
			t.Fatalf("lowers parsed back as %q, want %q (data %q)", lowers, []string{a, b}, data)
		}
		want := map[string]string{}
		if u != "" {
			want = map[string]string{"upperdir": u, "workdir": work}
		}
		if !reflect.DeepEqual(opts, want) {
			t.Fatalf("options parsed back as %q, want %q (data %q)", opts, want, data)
		}

		la, lb := "/l/"+a, "/l/x/"+b
		data, dir, err := OverlayOptionsIn([]string{la, lb}, "/"+u, "/w"+u, true)
		if err != nil {
			if !errors.Is(err, ErrInvalidOverlay) && !errors.Is(err, ErrOptionsTooLong) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		lowers, opts = parseOverlayData(data)
		abs := func(p string) string {
			if filepath.IsAbs(p) {
				return filepath.Clean(p)
			}
			return filepath.Join(dir, p)
		}
		if len(lowers) != 2 || abs(lowers[0]) != filepath.Clean(la) || abs(lowers[1]) != filepath.Clean(lb) {
			t.Fatalf("relative lowers %q in %q, want %q %q", lowers, dir, la, lb)
		}
		if abs(opts["upperdir"]) != filepath.Clean("/"+u) || abs(opts["workdir"]) != filepath.Clean("/w"+u) {
			t.Fatalf("relative options %q in %q", opts, dir)
		}
		if _, ok := opts["userxattr"]; !ok || len(opts) != 3 {
			t.Fatalf("options %q", opts)
		}
	})
}
