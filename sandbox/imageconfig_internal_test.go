package sandbox

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestMainCommand(t *testing.T) {
	httpd := v1.ImageConfig{Entrypoint: []string{"/bin/httpd"}, Cmd: []string{"-f", "-p", "80"}, User: "www"}
	for _, tc := range []struct {
		name string
		cfg  v1.ImageConfig
		o    CreateOptions
		want []string
	}{
		{"library default: Cmd only", httpd, CreateOptions{}, nil},
		{"library default with Cmd", httpd, CreateOptions{Cmd: []string{"sleep", "1"}}, []string{"sleep", "1"}},
		{"image's command", httpd, CreateOptions{ImageCommand: true}, []string{"/bin/httpd", "-f", "-p", "80"}},
		{"arguments replace Cmd", httpd, CreateOptions{ImageCommand: true, Cmd: []string{"-h"}}, []string{"/bin/httpd", "-h"}},
		{"entrypoint drops Cmd", httpd, CreateOptions{ImageCommand: true, EntrypointSet: true, Entrypoint: []string{"/bin/sh"}}, []string{"/bin/sh"}},
		{"no entrypoint", httpd, CreateOptions{ImageCommand: true, EntrypointSet: true, Cmd: []string{"true"}}, []string{"true"}},
		{"bare shell is not started", v1.ImageConfig{Cmd: []string{"/bin/bash"}}, CreateOptions{ImageCommand: true}, nil},
		{"a shell asked for is", v1.ImageConfig{Cmd: []string{"/bin/bash"}}, CreateOptions{ImageCommand: true, Cmd: []string{"sh"}}, []string{"sh"}},
		{"runtime image", v1.ImageConfig{Cmd: []string{"python3"}, Labels: map[string]string{runtimeImageLabel: "v1"}}, CreateOptions{ImageCommand: true}, nil},
		{"no command", v1.ImageConfig{}, CreateOptions{ImageCommand: true}, nil},
	} {
		got, err := mainCommand(tc.cfg, tc.o)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if u, err := defaultUser(httpd, CreateOptions{}); u != "www" || err != nil {
		t.Errorf("image's user: %q %v", u, err)
	}
	if u, _ := defaultUser(httpd, CreateOptions{User: "root"}); u != "" {
		t.Errorf("--user root: %q, want the executor's own (empty)", u)
	}
	if _, err := defaultUser(v1.ImageConfig{User: "a:b:c"}, CreateOptions{}); err == nil || !strings.Contains(err.Error(), "the image's User") {
		t.Errorf("bad image user: %v", err)
	}
	if err := checkImageConfig(v1.ImageConfig{WorkingDir: "relative"}); err == nil {
		t.Error("relative WorkingDir accepted")
	}
	if err := checkImageConfig(v1.ImageConfig{Env: []string{"NOEQUALS"}}); err == nil {
		t.Error("Env entry without = accepted")
	}
}

// FuzzImageConfig: an image's config is untrusted; whatever its
// Entrypoint, Cmd, User, Env and WorkingDir, deciding the main process and
// user never panics, and what is accepted is bounded and has no NUL.
func FuzzImageConfig(f *testing.F) {
	f.Add("/bin/httpd\x00-f", "-p\x0080", "www", "A=1\x00B=2", "/var/www", "")
	f.Add("", "/bin/sh", "0:0", "", "", "x")
	f.Add("", "", "a:b:c", "=x", "rel", "")
	f.Fuzz(func(t *testing.T, ep, cmd, user, env, wd, arg string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, "\x00")
		}
		cfg := v1.ImageConfig{Entrypoint: split(ep), Cmd: split(cmd), User: user, Env: split(env), WorkingDir: wd}
		if checkImageConfig(cfg) != nil {
			return
		}
		o := CreateOptions{ImageCommand: true}
		if arg != "" {
			o.Cmd = []string{arg}
		}
		argv, err := mainCommand(cfg, o)
		if err == nil {
			n := 0
			for _, a := range argv {
				n += len(a) + 1
				if strings.IndexByte(a, 0) >= 0 {
					t.Fatalf("argument with NUL accepted: %q", a)
				}
			}
			if n > maxCommandBytes || len(argv) > maxCommandArgs {
				t.Fatalf("command of %d bytes accepted", n)
			}
		}
		if u, err := defaultUser(cfg, o); err == nil && strings.Count(u, ":") > 1 {
			t.Fatalf("user %q accepted", u)
		}
	})
}

func TestImagePluginsLabel(t *testing.T) {
	rt := func(plugins string) v1.ImageConfig {
		return v1.ImageConfig{Labels: map[string]string{runtimeImageLabel: "1", RuntimePluginsLabel: plugins}}
	}
	var names []string
	for i := range maxImagePlugins + 1 {
		names = append(names, "p"+strconv.Itoa(i))
	}
	many := strings.Join(names, ",")
	for _, c := range []struct {
		cfg  v1.ImageConfig
		want []string
		err  string
	}{
		{v1.ImageConfig{}, nil, ""},
		{rt(""), nil, ""},
		{rt("jupyter,browser"), []string{"jupyter", "browser"}, ""},
		{rt(" jupyter , ,jupyter"), []string{"jupyter"}, ""},
		// Without bothy build's version label, the label is not bothy's.
		{v1.ImageConfig{Labels: map[string]string{RuntimePluginsLabel: "jupyter"}}, nil, ""},
		{rt("jupyter:eager"), nil, "invalid plugin"},
		{rt("Jupyter"), nil, "invalid plugin"},
		{rt("a/b"), nil, "invalid plugin"},
		{rt(strings.Repeat("p", 65)), nil, "invalid plugin"},
		{rt(many), nil, "more than 32"},
	} {
		got, err := imagePlugins(c.cfg)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: %v, want an error with %q", c.cfg.Labels, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%v: %q, %v; want %q", c.cfg.Labels, got, err, c.want)
		}
	}
}
