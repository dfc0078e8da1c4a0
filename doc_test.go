package bothy_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPackageDocs: every package of the module (testdata aside) has one doc
// comment, in one file, that starts as go doc expects: "Package NAME " or,
// for a command, "Command DIR ". A package without one, or with two, fails;
// so does a doc that names another package (one left behind by a rename).
func TestPackageDocs(t *testing.T) {
	type pkg struct {
		name string
		docs map[string]string // file name → doc comment
	}
	pkgs := map[string]*pkg{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (name == "testdata" || name == "vendor" || name == "bin" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		p := pkgs[dir]
		if p == nil {
			p = &pkg{name: f.Name.Name, docs: map[string]string{}}
			pkgs[dir] = p
		}
		if f.Doc != nil {
			p.docs[name] = f.Doc.Text()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("found %d packages: not run from the module's root?", len(pkgs))
	}
	for _, dir := range slices.Sorted(maps.Keys(pkgs)) {
		p := pkgs[dir]
		want := "Package " + p.name + " "
		if p.name == "main" {
			want = "Command " + filepath.Base(dir) + " "
		}
		switch len(p.docs) {
		case 0:
			t.Errorf("%s: no package doc comment: add a doc.go that starts %q and says what the package is for", dir, want)
		case 1:
			for file, doc := range p.docs {
				if !strings.HasPrefix(doc, want) {
					first, _, _ := strings.Cut(doc, "\n")
					t.Errorf("%s/%s: package doc starts %q, want %q", dir, file, first, want)
				}
			}
		default:
			t.Errorf("%s: %d files have a package doc comment (%s): keep one", dir, len(p.docs), strings.Join(slices.Sorted(maps.Keys(p.docs)), ", "))
		}
	}
}

// TestOperatorDocsCurrent: docs/operator.md describes subordinate-id
// ranges as supported (they are: userns.MapSubID), with no "not yet" left
// beside them, as an earlier version had.
func TestOperatorDocsCurrent(t *testing.T) {
	b, err := os.ReadFile("docs/operator.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.Contains(doc, "/etc/subuid") || !strings.Contains(doc, "newuidmap") {
		t.Error("docs/operator.md does not say how subordinate ids are set up")
	}
	for _, para := range strings.Split(doc, "\n\n") {
		p := strings.ToLower(para)
		if strings.Contains(p, "not yet") && strings.Contains(p, "subordinate") {
			t.Errorf("docs/operator.md says subordinate ids are not yet supported:\n%s", para)
		}
	}
}
