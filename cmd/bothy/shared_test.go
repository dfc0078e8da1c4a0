package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestFormatFlag: --format takes one of its choices ("" is the default) and
// refuses anything else as it is parsed, naming the choices.
func TestFormatFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
		err  string
	}{
		{nil, "table", ""},
		{[]string{"--format", "json"}, "json", ""},
		{[]string{"--format", ""}, "table", ""},
		{[]string{"--format=yaml"}, "", `unknown format "yaml": use table or json`},
	} {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		f := formatFlag(fs, "table", "json")
		err := fs.Parse(c.args)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v, want %q", c.args, err, c.err)
		case c.err == "" && (err != nil || f.value != c.want):
			t.Errorf("%q: %q, %v, want %q", c.args, f.value, err, c.want)
		}
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	formatFlag(fs, "text", "json")
	if usage := fs.FlagUsages(); !strings.Contains(usage, `--format string   output format: text or json (default "text")`) {
		t.Errorf("help: %q", usage)
	}
}
