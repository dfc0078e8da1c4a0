package plugins_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/plugins"
	browserserver "github.com/bothy-sandbox/bothy/plugins/browser/server"
	_ "github.com/bothy-sandbox/bothy/plugins/builtin"
	jupyterserver "github.com/bothy-sandbox/bothy/plugins/jupyter/server"
)

func TestParse(t *testing.T) {
	got, err := plugins.Parse(" vscode,jupyter,,jupyter ,browser")
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
	if got, err := plugins.Parse(""); err != nil || len(got) != 0 {
		t.Errorf("Parse(\"\") = %v, %v", got, err)
	}
	if _, err := plugins.Parse("jupyter,emacs"); !errors.Is(err, plugins.ErrUnknown) || !strings.Contains(err.Error(), "emacs") || !strings.Contains(err.Error(), "browser") {
		t.Errorf("unknown plugin: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, name := range plugins.Names() {
		p, _ := plugins.Lookup(name)
		r := p.Recipe()
		if err := r.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		script := r.Install()
		for _, p := range r.Packages {
			if !strings.Contains(script, " "+p) {
				t.Errorf("%s: install script does not install %s:\n%s", name, p, script)
			}
		}
		if !strings.HasPrefix(script, "set -eu\n") || !strings.Contains(script, plugins.Cleanup) {
			t.Errorf("%s: install script lacks set -eu or the clean-up:\n%s", name, script)
		}
	}
	for _, bad := range []plugins.Recipe{
		{Name: "Bad Name", Check: "true"},
		{Name: "x", Packages: []string{"jq; rm -rf /"}, Check: "true"},
		{Name: "x", Packages: []string{"jq"}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

// The plugins bothy ships declare their recipes, and say honestly why
// their services cannot start here: VS Code's and, as bothy-plugin runs
// it, Jupyter's need a reaper (the sandbox tests run them), the browser's
// finds no Chromium with an empty environment; and an executor without
// bothy-plugin runs neither of these two.
func TestBuiltinServicesUnavailable(t *testing.T) {
	if len(plugins.Names()) != 3 {
		t.Fatalf("builtin plugins: %v", plugins.Names())
	}
	ctx := context.Background()
	for _, name := range plugins.Names() {
		p, _ := plugins.Lookup(name)
		svc, err := p.Start(ctx, plugins.Env{})
		want := "runs no bothy-plugin"
		if name == "vscode" {
			want = "no reaper"
		}
		if svc != nil || err == nil || !strings.Contains(err.Error(), want) || (name != "vscode") != errors.Is(err, plugins.ErrUnavailable) {
			t.Errorf("%s: %v %v, want %s", name, svc, err, want)
		}
	}
	if svc, err := jupyterserver.Start(ctx, plugins.Env{}); svc != nil || err == nil || !strings.Contains(err.Error(), "no reaper") {
		t.Errorf("jupyter's service without a reaper: %v %v", svc, err)
	}
	if svc, err := browserserver.Start(ctx, plugins.Env{}); svc != nil || !errors.Is(err, plugins.ErrUnavailable) || !strings.Contains(err.Error(), "no Chromium") {
		t.Errorf("browser's service: %v %v, want unavailable: no Chromium", svc, err)
	}
}

// Names and package names are checked as the patterns
// ^[a-z0-9][a-z0-9-]{0,31}$ and ^[a-z0-9][a-z0-9+.-]+$ (Debian policy).
func TestRecipeNames(t *testing.T) {
	for name, ok := range map[string]bool{"jupyter": true, "a": true, "x-1": true, "1x": true, strings.Repeat("a", 32): true,
		"": false, "-x": false, "X": false, "a b": false, "a_b": false, "a.b": false, strings.Repeat("a", 33): false} {
		if err := (plugins.Recipe{Name: name, Check: "true"}).Validate(); (err == nil) != ok {
			t.Errorf("name %q: %v", name, err)
		}
	}
	for pkg, ok := range map[string]bool{"jq": true, "g++": true, "python3-ipykernel": true, "libc6.1": true, "0ad": true,
		"j": false, "+x": false, ".x": false, "-x": false, "Jq": false, "jq;rm": false, "jq rm": false, "": false} {
		if err := (plugins.Recipe{Name: "x", Packages: []string{pkg}, Check: "true"}).Validate(); (err == nil) != ok {
			t.Errorf("package %q: %v", pkg, err)
		}
	}
}

func TestParseEnabled(t *testing.T) {
	ps, eager, err := plugins.ParseEnabled("vscode, jupyter:eager,jupyter")
	if err != nil || len(ps) != 2 || ps[0].Name() != "jupyter" || ps[1].Name() != "vscode" || len(eager) != 1 || eager[0] != "jupyter" {
		t.Errorf("ParseEnabled: %v %v %v", ps, eager, err)
	}
	if _, _, err := plugins.ParseEnabled("nope:eager"); !errors.Is(err, plugins.ErrUnknown) {
		t.Errorf("unknown: %v", err)
	}
}

// AddKnown adds an image's plugins that are known and not yet enabled,
// sorted, and returns the unknown ones instead of failing.
func TestAddKnown(t *testing.T) {
	enabled, _, err := plugins.ParseEnabled("vscode")
	if err != nil {
		t.Fatal(err)
	}
	ps, unknown := plugins.AddKnown(enabled, "jupyter, vscode,,nope")
	if len(ps) != 2 || ps[0].Name() != "jupyter" || ps[1].Name() != "vscode" || len(unknown) != 1 || unknown[0] != "nope" {
		t.Errorf("AddKnown: %v %v", ps, unknown)
	}
	if len(enabled) != 1 {
		t.Errorf("AddKnown changed its argument: %v", enabled)
	}
}

// CheckInstalled names the plugins whose recipe check fails, their
// packages and the build command that adds them.
func TestCheckInstalled(t *testing.T) {
	var ran []string
	err := plugins.CheckInstalled(context.Background(), "img:1", []string{"jupyter:eager", "vscode"}, func(ctx context.Context, cmd string) (int, error) {
		ran = append(ran, cmd)
		if strings.Contains(cmd, "ipykernel") {
			return 1, nil
		}
		return 0, nil
	})
	var missing *plugins.MissingError
	if !errors.As(err, &missing) || len(missing.Missing) != 1 || len(ran) != 2 ||
		!strings.Contains(err.Error(), "python3-ipykernel") || !strings.HasSuffix(err.Error(), "bothy build --base img:1 --plugins jupyter") {
		t.Errorf("CheckInstalled: %v (ran %q)", err, ran)
	}
	if err := plugins.CheckInstalled(context.Background(), "img", []string{"vscode"}, func(context.Context, string) (int, error) { return 0, nil }); err != nil {
		t.Errorf("all present: %v", err)
	}
}
