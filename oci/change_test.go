package oci

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestApplyChange(t *testing.T) {
	cfg := v1.ImageConfig{Env: []string{"PATH=/bin", "A=1"}, WorkingDir: "/srv"}
	for _, c := range []string{
		`CMD ["python3", "-m", "http.server"]`,
		`ENTRYPOINT /docker-entrypoint.sh --flag`,
		`ENV A=2 B="two words" C=\x`,
		`ENV D value with spaces`,
		`LABEL org.example.team=infra`,
		`EXPOSE 8080 53/UDP`,
		`USER 1000:1000`,
		`WORKDIR app`,
		`VOLUME ["/data"]`,
		`stopsignal SIGINT`,
	} {
		if err := ApplyChange(&cfg, c); err != nil {
			t.Fatalf("ApplyChange(%q): %v", c, err)
		}
	}
	want := v1.ImageConfig{
		Cmd:          []string{"python3", "-m", "http.server"},
		Entrypoint:   []string{"/bin/sh", "-c", "/docker-entrypoint.sh --flag"},
		Env:          []string{"PATH=/bin", "A=2", "B=two words", `C=\x`, "D=value with spaces"},
		Labels:       map[string]string{"org.example.team": "infra"},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "53/udp": {}},
		User:         "1000:1000",
		WorkingDir:   "/srv/app",
		Volumes:      map[string]struct{}{"/data": {}},
		StopSignal:   "SIGINT",
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config:\n got %+v\nwant %+v", cfg, want)
	}
}

func TestApplyChangeRefused(t *testing.T) {
	for _, c := range []string{
		"", "CMD", "ONBUILD RUN true", "RUN true", "FROM x", `ENV`, `ENV =x`, `LABEL a`,
		`LABEL a="unterminated`, `EXPOSE 0`, `EXPOSE 70000`, `EXPOSE 80/icmp`, `USER a b`,
		`VOLUME relative`, `VOLUME ["/a"`, `CMD []`, `ENV a="x"y`, strings.Repeat("x", maxChangeLen+1),
	} {
		cfg := v1.ImageConfig{Env: []string{"A=1"}}
		err := ApplyChange(&cfg, c)
		if !errors.Is(err, ErrInvalidChange) {
			t.Errorf("ApplyChange(%.40q) = %v, want ErrInvalidChange", c, err)
		}
		if !reflect.DeepEqual(cfg, v1.ImageConfig{Env: []string{"A=1"}}) {
			t.Errorf("ApplyChange(%.40q) changed the config on error: %+v", c, cfg)
		}
	}
}

// FuzzApplyChange: any instruction either applies or is refused with
// ErrInvalidChange, leaving the config untouched, and what it sets is well
// formed.
func FuzzApplyChange(f *testing.F) {
	for _, s := range []string{`CMD ["a"]`, `ENV A="b c" D=e`, `EXPOSE 80/udp`, `WORKDIR ../x`, `VOLUME ["/v"]`, `LABEL a="\"q"`, "ENV\tA=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg := v1.ImageConfig{Env: []string{"A=1"}, WorkingDir: "/w"}
		if err := ApplyChange(&cfg, s); err != nil {
			if !errors.Is(err, ErrInvalidChange) {
				t.Fatalf("error %v is not ErrInvalidChange", err)
			}
			if !reflect.DeepEqual(cfg, v1.ImageConfig{Env: []string{"A=1"}, WorkingDir: "/w"}) {
				t.Fatalf("config changed on error: %+v", cfg)
			}
			return
		}
		if !strings.HasPrefix(cfg.WorkingDir, "/") {
			t.Fatalf("working directory %q is not absolute", cfg.WorkingDir)
		}
		for _, e := range cfg.Env {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				t.Fatalf("environment entry %q", e)
			}
		}
		for p := range cfg.ExposedPorts {
			if !strings.Contains(p, "/") {
				t.Fatalf("port %q has no protocol", p)
			}
		}
	})
}
