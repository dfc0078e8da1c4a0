package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestTemplateFormat: --format takes table, json or a template (parsed as
// the flag is: a bad one is refused there), translates \t and \n, and a
// table template gets a header made from its fields.
func TestTemplateFormat(t *testing.T) {
	type row struct {
		Id        string //nolint:revive // as the views
		CreatedAt string
		ImageID   string
	}
	rows := []any{row{"abc", "now", "i1"}, row{"defgh", "then", "i2"}}
	for _, tc := range []struct {
		arg, want, err string
	}{
		{"", "", ""},
		{"json", "", ""},
		{"table", "", ""},
		{`{{.Id}}\t{{.ImageID}}`, "abc\ti1\ndefgh\ti2\n", ""},
		{"{{.Id}}\n", "abc\ndefgh\n", ""},
		{`table {{.Id}}\t{{.CreatedAt}}\t{{.ImageID}}\t{{upper .Id}}`, "ID      CREATED AT   IMAGE ID   UPPER .ID\nabc     now          i1         ABC\ndefgh   then         i2         DEFGH\n", ""},
		{`{{truncate .Id 2}} {{json .ImageID}} {{lower "X"}} {{join (split .Id "e") "+"}}`, "ab \"i1\" x abc\nde \"i2\" x d+fgh\n", ""},
		{"yaml", "", `unknown format "yaml": use table or json, or a Go template such as '{{.ID}}'`},
		{"{{.Id", "", `bad template "{{.Id": template: format:1: unclosed action`},
		{"{{nope}}", "", `function "nope" not defined`},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f := templateFormatFlag(fs, "table", "json")
		err := fs.Parse([]string{"--format", tc.arg})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("--format %q: %v, want %q", tc.arg, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("--format %q: %v", tc.arg, err)
		}
		if !f.isTemplate() {
			if want := map[string]string{"": "table", "json": "json", "table": "table"}[tc.arg]; f.value != want {
				t.Errorf("--format %q: %q, want %q", tc.arg, f.value, want)
			}
			continue
		}
		var out bytes.Buffer
		if err := f.render(&out, nil, rows); err != nil || out.String() != tc.want {
			t.Errorf("--format %q: %q %v, want %q", tc.arg, out.String(), err, tc.want)
		}
	}
	// A field the rows lack: an error, nothing printed.
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f := templateFormatFlag(fs, "json")
	if err := fs.Parse([]string{"--format", "{{.Id}} {{.Nope}}"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := f.render(&out, nil, rows); err == nil || out.Len() != 0 || !strings.Contains(err.Error(), "can't evaluate field Nope") {
		t.Errorf("missing field: %q %v", out.String(), err)
	}
	if err := fs.Parse([]string{"--format", "table {{.Id}}"}); err == nil {
		t.Error("inspect's --format took table")
	}
	if got := upperWords("ImageID"); got != "IMAGE ID" {
		t.Errorf("upperWords(ImageID) = %q", got)
	}
}
