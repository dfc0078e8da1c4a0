package files

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzExtract feeds arbitrary bytes to Extract and checks that nothing
// outside the destination is created or changed, and that no symlink left in
// the destination leads out of it.
func FuzzExtract(f *testing.F) {
	f.Add(makeTar(f, tFile("a", "b"), tDir("d"), tSymlink("d/l", "../a"), tHardlink("h", "a")), byte(0))
	f.Add(gz(f, makeTar(f, tFile("x/y", "z"))), byte(0))
	f.Add(makeZip(f, tFile("a", "b"), tDir("d"), tSymlink("l", "a")), byte(0))
	f.Add(makeTar(f, tFile("../x", "p")), byte(1))
	f.Add(makeTar(f, tSymlink("l", "../sentinel"), tFile("l/keep", "p")), byte(1))
	f.Add(makeZip(f, tSymlink("l", "/"), tFile("l/x", "p")), byte(2))
	f.Add(makeTar(f, tHardlink("h", "../sentinel/keep")), byte(0))
	f.Add([]byte("PK\x05\x06"+strings.Repeat("\x00", 18)), byte(2))
	f.Fuzz(func(t *testing.T, data []byte, format byte) {
		s := newSandbox(t)
		formats := []ArchiveFormat{FormatAuto, FormatTar, FormatZip, FormatTarGz}
		opts := ExtractOptions{
			Format:     formats[int(format)%len(formats)],
			MaxBytes:   1 << 20,
			MaxEntries: 1000,
			TempDir:    t.TempDir(),
		}
		Extract(context.Background(), bytes.NewReader(data), s.dest, opts)
		s.check(t)
		// Make read-only directories readable for the check and TempDir's cleanup.
		filepath.WalkDir(s.dest, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
		filepath.WalkDir(s.dest, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			target, _ := os.Readlink(p)
			rel, _ := filepath.Rel(s.dest, p)
			resolved := path.Join(path.Dir(filepath.ToSlash(rel)), target)
			if strings.HasPrefix(target, "/") || resolved == ".." || strings.HasPrefix(resolved, "../") {
				t.Fatalf("symlink %s -> %s leads out of the destination", rel, target)
			}
			return nil
		})
	})
}
