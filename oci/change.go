package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// ErrInvalidChange: a --change instruction that is not one ApplyChange
// knows, or is malformed.
var ErrInvalidChange = errors.New("invalid change")

// maxChangeLen bounds one instruction: a Dockerfile line, not a file.
const maxChangeLen = 64 << 10

// ApplyChange applies one Dockerfile instruction to an image config, as
// docker commit --change and podman commit --change do: CMD, ENTRYPOINT
// (JSON array or shell form, which becomes ["/bin/sh", "-c", …]), ENV
// (K=V … or K V), LABEL (K=V …), EXPOSE (PORT[/PROTO] …), USER, WORKDIR
// (relative to the previous one), VOLUME (JSON array or paths) and
// STOPSIGNAL. Anything else, ONBUILD included, is ErrInvalidChange; cfg is
// left as it was on error.
func ApplyChange(cfg *v1.ImageConfig, change string) error {
	if len(change) > maxChangeLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidChange, maxChangeLen)
	}
	s := strings.TrimSpace(change)
	word, rest, _ := strings.Cut(s, " ")
	if i := strings.IndexAny(word, "\t\n"); i >= 0 {
		word, rest = word[:i], word[i:]+" "+rest
	}
	rest = strings.TrimSpace(rest)
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidChange, s, fmt.Sprintf(format, a...))
	}
	if rest == "" {
		return bad("%s needs an argument", strings.ToUpper(word))
	}
	switch strings.ToUpper(word) {
	case "CMD", "ENTRYPOINT":
		argv, err := commandForm(rest)
		if err != nil {
			return bad("%v", err)
		}
		if strings.EqualFold(word, "CMD") {
			cfg.Cmd = argv
		} else {
			cfg.Entrypoint = argv
		}
	case "ENV", "LABEL":
		pairs, err := keyValues(rest, strings.EqualFold(word, "ENV"))
		if err != nil {
			return bad("%v", err)
		}
		if strings.EqualFold(word, "ENV") {
			for _, kv := range pairs {
				cfg.Env = setEnv(cfg.Env, kv[0], kv[1])
			}
			break
		}
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		}
		for _, kv := range pairs {
			cfg.Labels[kv[0]] = kv[1]
		}
	case "EXPOSE":
		var ports []string
		for _, p := range strings.Fields(rest) {
			num, proto, ok := strings.Cut(p, "/")
			if !ok {
				proto = "tcp"
			}
			proto = strings.ToLower(proto)
			if n, err := strconv.ParseUint(num, 10, 16); err != nil || n == 0 || (proto != "tcp" && proto != "udp" && proto != "sctp") {
				return bad("%q is not PORT[/tcp|udp|sctp]", p)
			}
			ports = append(ports, num+"/"+proto)
		}
		if cfg.ExposedPorts == nil {
			cfg.ExposedPorts = map[string]struct{}{}
		}
		for _, p := range ports {
			cfg.ExposedPorts[p] = struct{}{}
		}
	case "USER":
		if strings.ContainsAny(rest, " \t\n") {
			return bad("USER takes one NAME or UID[:GID]")
		}
		cfg.User = rest
	case "WORKDIR":
		if strings.ContainsRune(rest, 0) {
			return bad("a NUL byte in the path")
		}
		if !path.IsAbs(rest) {
			rest = path.Join("/", cfg.WorkingDir, rest)
		}
		cfg.WorkingDir = path.Clean(rest)
	case "VOLUME":
		var vols []string
		if strings.HasPrefix(rest, "[") {
			if err := json.Unmarshal([]byte(rest), &vols); err != nil {
				return bad("not a JSON array of strings: %v", err)
			}
		} else {
			vols = strings.Fields(rest)
		}
		for _, v := range vols {
			if !path.IsAbs(v) || strings.ContainsRune(v, 0) {
				return bad("volume %q is not an absolute path", v)
			}
		}
		if cfg.Volumes == nil {
			cfg.Volumes = map[string]struct{}{}
		}
		for _, v := range vols {
			cfg.Volumes[path.Clean(v)] = struct{}{}
		}
	case "STOPSIGNAL":
		if strings.ContainsAny(rest, " \t\n") {
			return bad("STOPSIGNAL takes one signal")
		}
		cfg.StopSignal = rest
	default:
		return bad("want CMD, ENTRYPOINT, ENV, EXPOSE, LABEL, STOPSIGNAL, USER, VOLUME or WORKDIR")
	}
	return nil
}

// commandForm reads a CMD or ENTRYPOINT argument: a JSON array of strings
// (exec form), or anything else run by /bin/sh -c (shell form), as
// Dockerfiles do.
func commandForm(s string) ([]string, error) {
	if strings.HasPrefix(s, "[") {
		var argv []string
		if err := json.Unmarshal([]byte(s), &argv); err == nil {
			if len(argv) == 0 {
				return nil, errors.New("empty command")
			}
			return argv, nil
		}
	}
	return []string{"/bin/sh", "-c", s}, nil
}

// keyValues reads K=V pairs (V may be double-quoted, with backslash
// escapes), or, for ENV, the older "K V" form.
func keyValues(s string, env bool) ([][2]string, error) {
	if env {
		if k, v, ok := strings.Cut(s, " "); ok && !strings.Contains(k, "=") {
			if k == "" {
				return nil, errors.New("empty name")
			}
			return [][2]string{{k, strings.TrimSpace(v)}}, nil
		}
	}
	var out [][2]string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimLeft(s, " \t\n") {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n\"") {
			return nil, fmt.Errorf("%q is not NAME=VALUE", firstWord(s))
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := closingQuote(rest)
			if end < 0 {
				return nil, fmt.Errorf("unterminated quote in %q", s)
			}
			u, err := strconv.Unquote(rest[:end+1])
			if err != nil {
				return nil, fmt.Errorf("value of %s: %v", k, err)
			}
			v, rest = u, rest[end+1:]
			if rest != "" && !strings.ContainsAny(rest[:1], " \t\n") {
				return nil, fmt.Errorf("value of %s: text after the closing quote", k)
			}
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		if env && strings.ContainsRune(k+v, 0) {
			return nil, fmt.Errorf("a NUL byte in %s", k)
		}
		out = append(out, [2]string{k, v})
		s = rest
	}
	return out, nil
}

// closingQuote is the index of the double quote ending the one at s[0], or
// -1.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

func firstWord(s string) string {
	if i := strings.IndexAny(s, " \t\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// setEnv sets K=V in env, replacing an earlier K.
func setEnv(env []string, k, v string) []string {
	for i, e := range env {
		if name, _, _ := strings.Cut(e, "="); name == k {
			out := append([]string(nil), env...)
			out[i] = k + "=" + v
			return out
		}
	}
	return append(append([]string(nil), env...), k+"="+v)
}
