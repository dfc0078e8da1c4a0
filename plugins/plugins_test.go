package plugins

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	got, err := Parse(" vscode,jupyter,,jupyter ,browser")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "browser,jupyter,vscode" {
		t.Errorf("Parse: %v, want sorted and without duplicates", names)
	}
	if got, err := Parse(""); err != nil || len(got) != 0 {
		t.Errorf("Parse(\"\") = %v, %v", got, err)
	}
	if _, err := Parse("jupyter,emacs"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "emacs") || !strings.Contains(err.Error(), "browser") {
		t.Errorf("unknown plugin: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, name := range Names() {
		r, _ := Lookup(name)
		if err := r.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		script := r.Install()
		for _, p := range r.Packages {
			if !strings.Contains(script, " "+p) {
				t.Errorf("%s: install script does not install %s:\n%s", name, p, script)
			}
		}
		if !strings.HasPrefix(script, "set -eu\n") || !strings.Contains(script, Cleanup) {
			t.Errorf("%s: install script lacks set -eu or the clean-up:\n%s", name, script)
		}
	}
	for _, bad := range []Recipe{
		{Name: "Bad Name", Check: "true"},
		{Name: "x", Packages: []string{"jq; rm -rf /"}, Check: "true"},
		{Name: "x", Packages: []string{"jq"}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
