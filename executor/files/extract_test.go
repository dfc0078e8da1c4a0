package files

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func extractBytes(t testing.TB, b []byte, dest string, opts ExtractOptions) (*ExtractResult, error) {
	t.Helper()
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	return Extract(context.Background(), bytes.NewReader(b), dest, opts)
}

type archiveKind struct {
	name string
	make func(testing.TB, ...entry) []byte
}

var archiveKinds = []archiveKind{
	{"tar", makeTar},
	{"tar.gz", func(t testing.TB, e ...entry) []byte { return gz(t, makeTar(t, e...)) }},
	{"zip", makeZip},
}

func TestExtractGood(t *testing.T) {
	for _, k := range archiveKinds {
		t.Run(k.name, func(t *testing.T) {
			s := newSandbox(t)
			exec := entry{name: "bin/run.sh", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o4755}
			entries := []entry{
				tDir("./"),
				tDir("src"),
				tFile("src/main.go", "package main\n"),
				tFile("./top.txt", "top"),
				exec, // parent created implicitly, setuid dropped
				tSymlink("src/link", "main.go"),
				tSymlink("up", "src/../top.txt"),
			}
			if k.name != "zip" {
				entries = append(entries, tHardlink("src/hard", "src/main.go"))
			}
			res, err := extractBytes(t, k.make(t, entries...), s.dest, ExtractOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.check(t)
			got := tree(t, s.dest)
			want := map[string]string{
				"src":         "dir -rwxr-xr-x",
				"src/main.go": "file -rw-r--r-- package main\n",
				"src/link":    "symlink -> main.go",
				"top.txt":     "file -rw-r--r-- top",
				"bin":         "dir -rwxr-xr-x",
				"bin/run.sh":  "file -rwxr-xr-x #!/bin/sh\n",
				"up":          "symlink -> src/../top.txt",
			}
			if k.name != "zip" {
				want["src/hard"] = "file -rw-r--r-- package main\n"
			}
			for p, w := range want {
				if got[p] != w {
					t.Errorf("%s: %q, want %q", p, got[p], w)
				}
			}
			if len(got) != len(want) {
				t.Errorf("tree %v", got)
			}
			if res.Files != 3 || res.Symlinks != 2 {
				t.Errorf("result %+v", res)
			}
			fi, _ := os.Stat(filepath.Join(s.dest, "src", "main.go"))
			if !fi.ModTime().Equal(testTime) {
				t.Errorf("mtime %v", fi.ModTime())
			}
		})
	}
}

func TestExtractReadOnlyDirIsFilled(t *testing.T) {
	s := newSandbox(t)
	ro := entry{name: "ro", typ: tar.TypeDir, mode: 0o555}
	_, err := extractBytes(t, makeTar(t, ro, tFile("ro/f", "x")), s.dest, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(s.dest, "ro"))
	if fi.Mode().Perm() != 0o555 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	os.Chmod(filepath.Join(s.dest, "ro"), 0o755) // let TempDir clean up
}

func TestExtractHostile(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
		onlyTar bool
		want    error
	}{
		{"dot-dot", []entry{tFile("../x", "pwned")}, false, ErrInvalidPath},
		{"dot-dot inside", []entry{tFile("a/../../x", "pwned")}, false, ErrInvalidPath},
		{"dot-dot into sentinel", []entry{tFile("../sentinel/keep", "pwned")}, false, ErrInvalidPath},
		{"absolute", []entry{tFile("/tmp/bothy-abs-pwned", "pwned")}, false, ErrInvalidPath},
		{"symlink out then write", []entry{tSymlink("link", "../sentinel"), tFile("link/keep", "pwned")}, false, ErrInvalidPath},
		{"absolute symlink then write", []entry{tSymlink("link", "/"), tFile("link/tmp/pwned", "pwned")}, false, ErrInvalidPath},
		{"nested symlink out", []entry{tDir("a"), tSymlink("a/b", "../../sentinel"), tFile("a/b/keep", "pwned")}, false, ErrInvalidPath},
		{"symlink to dot-dot", []entry{tSymlink("link", "..")}, false, ErrInvalidPath},
		{"hard link out", []entry{tHardlink("h", "../sentinel/keep")}, true, ErrInvalidPath},
		{"hard link absolute", []entry{tHardlink("h", "/etc/passwd")}, true, ErrInvalidPath},
		{"hard link to missing", []entry{tHardlink("h", "nothing")}, true, ErrInvalidPath},
		{"char device", []entry{{name: "dev", typ: tar.TypeChar, mode: 0o644}}, false, ErrInvalidPath},
		{"block device", []entry{{name: "dev", typ: tar.TypeBlock, mode: 0o644}}, true, ErrInvalidPath},
		{"fifo", []entry{{name: "fifo", typ: tar.TypeFifo, mode: 0o644}}, false, ErrInvalidPath},
		{"file over extracted dir", []entry{tDir("d"), tFile("d", "x")}, false, ErrInvalidPath},
	}
	for _, k := range archiveKinds {
		for _, c := range cases {
			if c.onlyTar && k.name == "zip" {
				continue
			}
			t.Run(k.name+"/"+c.name, func(t *testing.T) {
				s := newSandbox(t)
				_, err := extractBytes(t, k.make(t, c.entries...), s.dest, ExtractOptions{})
				if !errors.Is(err, c.want) {
					t.Errorf("err = %v, want %v", err, c.want)
				}
				s.check(t)
				if _, err := os.Lstat("/tmp/bothy-abs-pwned"); err == nil {
					t.Fatal("absolute entry written")
				}
			})
		}
	}
}

// A symlink already in the destination that leads out must not be written
// through, whether it is a parent of an entry or the entry itself.
func TestExtractThroughExistingSymlink(t *testing.T) {
	for _, k := range archiveKinds {
		t.Run(k.name, func(t *testing.T) {
			s := newSandbox(t)
			os.MkdirAll(s.dest, 0o755)
			os.Symlink(s.sentinel, filepath.Join(s.dest, "abs"))
			os.Symlink("../sentinel", filepath.Join(s.dest, "rel"))
			os.Symlink("../sentinel/keep", filepath.Join(s.dest, "filelink"))
			for _, name := range []string{"abs/keep", "rel/keep", "abs/new", "rel/sub/new"} {
				_, err := extractBytes(t, k.make(t, tFile(name, "pwned")), s.dest, ExtractOptions{})
				if err == nil {
					t.Errorf("%s: extraction through an escaping symlink succeeded", name)
				}
				s.check(t)
			}
			// The final component is replaced, not followed.
			if _, err := extractBytes(t, k.make(t, tFile("filelink", "mine")), s.dest, ExtractOptions{}); err != nil {
				t.Fatal(err)
			}
			s.check(t)
			if fi, _ := os.Lstat(filepath.Join(s.dest, "filelink")); !fi.Mode().IsRegular() {
				t.Errorf("filelink is %v", fi.Mode())
			}
		})
	}
}

func TestExtractBombs(t *testing.T) {
	zeros := strings.Repeat("\x00", 8<<20)
	for _, k := range archiveKinds {
		t.Run(k.name, func(t *testing.T) {
			s := newSandbox(t)
			b := k.make(t, tFile("a", zeros[:1<<20]), tFile("b", zeros))
			_, err := extractBytes(t, b, s.dest, ExtractOptions{MaxBytes: 2 << 20})
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "expands to more than") {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
			if _, err := os.Lstat(filepath.Join(s.dest, "b")); err == nil {
				t.Error("the entry that crossed the limit was left behind")
			}
			s.check(t)

			var many []entry
			for i := range 50 {
				many = append(many, tFile(strings.Repeat("x", i+1), ""))
			}
			_, err = extractBytes(t, k.make(t, many...), newSandbox(t).dest, ExtractOptions{MaxEntries: 20})
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("entries: err = %v, want ErrTooLarge", err)
			}
		})
	}
}

func TestExtractNotAnArchive(t *testing.T) {
	s := newSandbox(t)
	for _, b := range [][]byte{[]byte("just text"), nil, gz(t, []byte("not a tar"))} {
		_, err := extractBytes(t, b, s.dest, ExtractOptions{})
		if !errors.Is(err, ErrInvalidPath) {
			t.Errorf("%q: err = %v, want ErrInvalidPath", b, err)
		}
	}
	if _, err := extractBytes(t, makeTar(t, tFile("a", "b")), s.dest, ExtractOptions{Format: "rar"}); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("unknown format: %v", err)
	}
	s.check(t)
}

func TestExtractSetsOwner(t *testing.T) {
	s := newSandbox(t)
	archive := makeTar(t, tFile("d/f", "x"), tSymlink("l", "d/f"))
	opts := ExtractOptions{Owner: &Owner{UID: 4321, GID: 4322}}
	if !asRoot(t, func() error {
		_, err := extractBytes(t, archive, s.dest, opts)
		s.check(t)
		return err
	}) {
		return
	}
	_, err := extractBytes(t, archive, s.dest, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d", "d/f", "l"} {
		if u, g := owner(t, filepath.Join(s.dest, p)); u != 4321 || g != 4322 {
			t.Errorf("%s owned by %d:%d", p, u, g)
		}
	}
}

func TestUpload(t *testing.T) {
	s := newSandbox(t)
	res, err := Upload(context.Background(), filepath.Join(s.dest, "plain.zip"), bytes.NewReader(makeZip(t, tFile("a", "b"))), UploadOptions{})
	if err != nil || res.File == nil || res.Archive != nil {
		t.Fatalf("plain upload: %+v %v", res, err)
	}
	res, err = Upload(context.Background(), filepath.Join(s.dest, "unpacked"), bytes.NewReader(makeZip(t, tFile("a", "b"))),
		UploadOptions{Extract: true, Archive: ExtractOptions{TempDir: t.TempDir()}})
	if err != nil || res.Archive == nil || res.Archive.Files != 1 {
		t.Fatalf("extracting upload: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.dest, "unpacked", "a")); string(b) != "b" {
		t.Errorf("content %q", b)
	}
	s.check(t)
}

func TestEntryName(t *testing.T) {
	for raw, want := range map[string]string{
		"a":       "a",
		"./a/":    "a",
		"a//b/./": "a/b",
		".":       "",
		"./":      "",
	} {
		got, err := entryName(raw)
		if err != nil || got != want {
			t.Errorf("entryName(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{"", "/a", "..", "a/..", "../a", "a/../b", "a\x00b"} {
		if _, err := entryName(raw); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("entryName(%q) accepted", raw)
		}
	}
}

// Escaping symlinks are refused, skipped or kept as the policy says; a kept
// one is never written through by the rest of the archive.
func TestExtractSymlinkPolicy(t *testing.T) {
	for _, k := range archiveKinds {
		t.Run(k.name, func(t *testing.T) {
			s := newSandbox(t)
			arch := k.make(t, tSymlink("abs", s.sentinel), tSymlink("up", "../sentinel/keep"), tFile("ok", "x"))
			if _, err := extractBytes(t, arch, s.dest, ExtractOptions{}); !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("refuse: %v", err)
			}
			os.RemoveAll(s.dest)
			res, err := extractBytes(t, arch, s.dest, ExtractOptions{Symlinks: SymlinksSkip})
			if err != nil || res.Skipped != 2 || res.Symlinks != 0 || res.Files != 1 {
				t.Fatalf("skip: %+v %v", res, err)
			}
			os.RemoveAll(s.dest)
			res, err = extractBytes(t, arch, s.dest, ExtractOptions{Symlinks: SymlinksKeep})
			if err != nil || res.Symlinks != 2 {
				t.Fatalf("keep: %+v %v", res, err)
			}
			if l, _ := os.Readlink(filepath.Join(s.dest, "abs")); l != s.sentinel {
				t.Fatalf("kept symlink: %q", l)
			}
			if _, err := extractBytes(t, k.make(t, tFile("abs/keep", "pwned")), s.dest, ExtractOptions{Symlinks: SymlinksKeep}); err == nil {
				t.Error("extraction through a kept symlink succeeded")
			}
			s.check(t)
		})
	}
}
