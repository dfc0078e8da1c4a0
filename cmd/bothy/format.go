package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"text/template"
	"unicode"

	"github.com/spf13/pflag"
)

// --format as podman's: "table" (the default table), "json" (a JSON
// array of the command's view), or a Go template evaluated against each
// row of the same view ("{{.ID}} {{.Names}}"), printed one a line; a
// template starting with "table " is printed as a table, under a header
// made from the fields it names. The view types are in views.go.

// templateFormat is the value of a --format flag that takes a template.
type templateFormat struct {
	value string // "table", "json" or "" for a template
	tmpl  *template.Template
	table bool   // a "table ..." template: aligned, with a header
	text  string // the template as given, escapes translated
	// choices are the named formats; the first is the default.
	choices []string
}

// templateFormatFlag adds --format to fs: one of choices (the first is the
// default) or a Go template.
func templateFormatFlag(fs *pflag.FlagSet, choices ...string) *templateFormat {
	return templateFormatFlagP(fs, "", choices...)
}

// templateFormatFlagP is templateFormatFlag with a one-letter flag too
// (inspect's -f, as podman's).
func templateFormatFlagP(fs *pflag.FlagSet, short string, choices ...string) *templateFormat {
	f := &templateFormat{value: choices[0], choices: choices}
	fs.VarP(f, "format", short, "output format: "+strings.Join(choices, " or ")+", or a Go template ('{{.ID}} {{.Names}}', 'table {{.ID}}\\t{{.Names}}', '{{json .}}'; see docs/cli.md)")
	return f
}

func (f *templateFormat) String() string {
	if f.value == "" {
		return f.text
	}
	return f.value
}

// Type is what help shows as the flag's argument.
func (f *templateFormat) Type() string { return "string" }

// templateFuncs are the helpers podman's templates have that matter.
var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
	"title": func(s string) string {
		if s == "" {
			return s
		}
		r := []rune(s)
		r[0] = unicode.ToUpper(r[0])
		return string(r)
	},
	"join":  strings.Join,
	"split": strings.Split,
	// truncate keeps the first n runes of s.
	"truncate": func(s string, n int) string {
		r := []rune(s)
		if n >= 0 && len(r) > n {
			return string(r[:n])
		}
		return s
	},
}

// escapes are what a shell leaves in a single-quoted template: a literal
// \t or \n means a tab or a newline, as in podman's and docker's.
var escapes = strings.NewReplacer(`\t`, "\t", `\n`, "\n")

// Set takes one of the choices ("" is the default) or a template, parsed
// here so that a bad one is refused before the command does anything.
func (f *templateFormat) Set(s string) error {
	switch {
	case s == "":
		f.value, f.tmpl = f.choices[0], nil
		return nil
	case strings.TrimSpace(s) == "json" || strings.TrimSpace(s) == "table" && slices.Contains(f.choices, "table"):
		f.value, f.tmpl = strings.TrimSpace(s), nil
		return nil
	}
	text := s
	table := false
	if rest, ok := strings.CutPrefix(s, "table "); ok {
		if !slices.Contains(f.choices, "table") {
			return fmt.Errorf("unknown format %q: no table here: use %s, or a Go template such as '{{.ID}}'", s, strings.Join(f.choices, " or "))
		}
		text, table = rest, true
	}
	if !strings.Contains(text, "{{") {
		return fmt.Errorf("unknown format %q: use %s, or a Go template such as '{{.ID}}'", s, strings.Join(f.choices, " or "))
	}
	text = escapes.Replace(text)
	t, err := template.New("format").Funcs(templateFuncs).Option("missingkey=error").Parse(text)
	if err != nil {
		return fmt.Errorf("bad template %q: %w", s, err)
	}
	f.value, f.tmpl, f.table, f.text = "", t, table, text
	return nil
}

// isJSON reports whether --format json was given (or is the default).
func (f *templateFormat) isJSON() bool { return f.value == "json" }

// isTemplate reports whether --format is a template.
func (f *templateFormat) isTemplate() bool { return f.tmpl != nil }

// render prints each row through the template, one a line (a newline is
// added after a template that does not end with one); a "table" template
// is aligned in columns under a header. Nothing is printed unless every
// row renders: an error (a field the view does not have) is said once,
// naming the template.
func (f *templateFormat) render(w io.Writer, headers map[string]string, rows []any) error {
	var buf bytes.Buffer
	var out io.Writer = &buf
	var tw *tabwriter.Writer
	if f.table {
		tw = tabwriter.NewWriter(&buf, 0, 4, 3, ' ', 0)
		out = tw
		fmt.Fprintln(out, templateHeader(f.text, headers))
	}
	for _, r := range rows {
		var line bytes.Buffer
		if err := f.tmpl.Execute(&line, r); err != nil {
			return fmt.Errorf("--format template %q: %w", f.text, err)
		}
		if !bytes.HasSuffix(line.Bytes(), []byte("\n")) {
			line.WriteByte('\n')
		}
		out.Write(line.Bytes())
	}
	if tw != nil {
		tw.Flush()
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// actions are a template's {{ }} actions.
var actions = regexp.MustCompile(`{{-?\s*(.*?)\s*-?}}`)

// templateHeader is a table template's header: each action replaced by
// its column's name, headers[FIELD] for {{.FIELD}} or else the field's
// name in capitals, words apart ("CreatedAt": "CREATED AT").
func templateHeader(text string, headers map[string]string) string {
	h := actions.ReplaceAllStringFunc(text, func(a string) string {
		expr := actions.FindStringSubmatch(a)[1]
		field := strings.TrimPrefix(expr, ".")
		if h, ok := headers[field]; ok {
			return h
		}
		if field != "" && strings.IndexFunc(field, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) < 0 {
			return upperWords(field)
		}
		return strings.ToUpper(strings.Trim(expr, ". "))
	})
	return strings.TrimRight(h, "\n")
}

// upperWords turns CamelCase into CAMEL CASE, keeping acronyms (ImageID:
// IMAGE ID).
func upperWords(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1])) {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToUpper(c))
	}
	return b.String()
}

// rowsOf makes a []any of a typed slice, for render.
func rowsOf[T any](list []T) []any {
	out := make([]any, len(list))
	for i, v := range list {
		out[i] = v
	}
	return out
}
