package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// What several commands share, written once: the usage of the commands
// bothy-images runs, and flags.

// usage is a command's usage line and one-line summary.
type usage struct{ use, short string }

// The commands that move images in and out of the store run in
// bothy-images: bothy lists them and hands them over (images_helper.go),
// bothy-images defines them (images_local.go).
var (
	pullUsage = usage{"pull REF",
		"Pull an image (docker://, oci:, oci-archive:, docker-archive:; a bare name means docker://)"}
	pushUsage = usage{"push IMAGE DEST",
		"Copy an image to a registry (a bare DEST means docker://) or any transport: oci-archive:, oci:, docker-archive:"}
	saveUsage = usage{"save [-o FILE] [--format oci-archive|oci-dir|docker-archive] IMAGE [FILE|TRANSPORT:DEST]",
		"Write an image to an OCI archive (a bare FILE), or oci:DIR, docker-archive:FILE"}
	loadUsage = usage{"load [-i] ARCHIVE [NAME[:TAG]]",
		"Load the image in an OCI archive, OCI layout directory or docker archive (named as the archive names it, unless NAME is given)"}
	buildUsage = usage{"build [--base IMAGE] [--plugins jupyter,browser,vscode] [--setup FILE]",
		"Build a runtime image: base + plugin dependencies + setup script + executor, tagged by content hash"}
)

// outputFormat is the value of a --format flag: one of its choices, the
// first by default, checked as the flag is parsed (before the command does
// anything).
type outputFormat struct {
	value   string
	choices []string
}

// formatFlag adds --format to fs.
func formatFlag(fs *pflag.FlagSet, choices ...string) *outputFormat {
	f := &outputFormat{value: choices[0], choices: choices}
	fs.Var(f, "format", "output format: "+strings.Join(choices, " or "))
	return f
}

func (f *outputFormat) String() string { return f.value }

// Type is what help shows as the flag's argument.
func (f *outputFormat) Type() string { return "string" }

// Set takes one of the choices; "" is the default.
func (f *outputFormat) Set(s string) error {
	switch {
	case s == "":
		f.value = f.choices[0]
	case slices.Contains(f.choices, s):
		f.value = s
	default:
		return fmt.Errorf("unknown format %q: use %s", s, strings.Join(f.choices, " or "))
	}
	return nil
}

// commandFlags adds the flags of run and exec for the command they run;
// commandEnv reads env and envFiles.
func commandFlags(fs *pflag.FlagSet, stdin *bool, env, envFiles *[]string, workdir *string, timeout *float64) {
	fs.BoolVarP(stdin, "interactive", "i", false, "forward standard input to the command")
	fs.StringArrayVarP(env, "env", "e", nil, "set an environment variable: K=V, or K for bothy's own value of K (repeatable)")
	fs.StringArrayVar(envFiles, "env-file", nil, "read environment variables from a file: K=V or K a line, blank lines and # comments skipped; -e wins (repeatable)")
	fs.StringVarP(workdir, "workdir", "w", "", "working directory inside the sandbox")
	fs.Float64Var(timeout, "timeout", 0, "kill the command after this many seconds")
}

// commandEnv is run's and exec's environment, as docker reads it: the
// variables of files (each line KEY=VALUE, or KEY alone; blank lines and
// lines starting with # skipped), then env's, which win. KEY alone takes
// bothy's own value of KEY, and is left out when bothy has none.
func commandEnv(files, env []string) ([]string, error) {
	var out []string
	add := func(kv string) error {
		k, _, ok := strings.Cut(kv, "=")
		if k == "" || strings.ContainsAny(k, " \t\x00") {
			return fmt.Errorf("invalid variable name %q", k)
		}
		if !ok {
			v, set := os.LookupEnv(k)
			if !set {
				return nil
			}
			kv = k + "=" + v
		}
		out = append(out, kv)
		return nil
	}
	for _, f := range files {
		lines, err := settingLines("--env-file", f)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			if err := add(l.text); err != nil {
				return nil, fmt.Errorf("--env-file %s, line %d: %w", f, l.n, err)
			}
		}
	}
	for _, kv := range env {
		if err := add(kv); err != nil {
			return nil, fmt.Errorf("-e %q: %w", kv, err)
		}
	}
	return out, nil
}

// settingLine is a line of a settings file and its number (from 1).
type settingLine struct {
	n    int
	text string
}

// settingLines are the lines of a Docker-style settings file (--env-file,
// --label-file): leading blanks and a trailing CR dropped, blank lines and
// lines starting with # skipped.
func settingLines(flag, file string) ([]settingLine, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	var out []settingLine
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimLeft(strings.TrimRight(line, "\r"), " \t")
		if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
			out = append(out, settingLine{i + 1, line})
		}
	}
	return out, nil
}
