package runtimeimage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/distribution/reference"

	"github.com/bothy-sandbox/bothy/plugins"
)

// Version is bothy's version as runtime image tags carry it ("v" + Version).
// A new version never reuses the images of an older one.
var Version = "0.1.0"

// Repository is where runtime images are named: "bothy-runtime:TAG" resolves
// to it.
const Repository = "localhost/bothy-runtime"

// maxTag is the OCI distribution spec's limit on a tag's length.
const maxTag = 128

// Tags are the three names of one runtime image, from most generic to most
// specific (OpenHands' scheme).
type Tags struct {
	// Versioned: v{version}_{base image name, sanitised}.
	Versioned string `json:"versioned"`
	// Lock: v{version}_{hash of base digest, plugins, recipes, setup file}.
	Lock string `json:"lock"`
	// Source: {lock}_{hash of the executor binary and the plugin code}.
	Source string `json:"source"`
}

// Names returns the tags as full image names (Repository:tag), source first.
func (t Tags) Names() []string {
	return []string{Repository + ":" + t.Source, Repository + ":" + t.Lock, Repository + ":" + t.Versioned}
}

func versionPrefix() string { return "v" + sanitize(Version) + "_" }

// VersionedTag is the versioned tag for a base image reference.
func VersionedTag(base string) string {
	prefix := versionPrefix()
	s := SanitizeBase(base)
	if limit := maxTag - len(prefix); len(s) > limit {
		// Keep the readable head; the hash of the whole keeps names apart.
		s = s[:limit-17] + "_" + hash16(s)
	}
	return prefix + s
}

// LockTag is the lock tag for a lock hash (LockHash).
func LockTag(lockHash string) string { return versionPrefix() + lockHash }

// SourceTag is the source tag for a lock tag and a source hash (SourceHash).
func SourceTag(lockTag, sourceHash string) string { return lockTag + "_" + sourceHash }

// SanitizeBase turns an image reference into tag characters
// ([a-z0-9_.-]), one-to-one on the references that matter: "/" becomes
// "_s_", the ":" of a registry port "_p_", the tag's ":" "_t_", a digest
// "_d_" and its first 16 hex digits. Docker Hub's "docker.io/library/" is
// dropped ("python:3.12" → "python_t_3.12"). A reference the distribution
// grammar refuses (a transport such as "oci-archive:/x.tar") is kept as text
// with "/" as "_s_", ":" as "_c_" and other characters as "-". The result
// may be longer than a tag can be: VersionedTag shortens it.
func SanitizeBase(ref string) string {
	ref = strings.TrimPrefix(strings.TrimSpace(ref), "docker://")
	if named, err := reference.ParseNormalizedNamed(strings.ToLower(ref)); err == nil {
		domain, path := reference.Domain(named), reference.Path(named)
		var b strings.Builder
		if domain != "docker.io" {
			b.WriteString(strings.ReplaceAll(domain, ":", "_p_"))
			b.WriteString("_s_")
		} else {
			path = strings.TrimPrefix(path, "library/")
		}
		b.WriteString(strings.ReplaceAll(path, "/", "_s_"))
		if t, ok := named.(reference.Tagged); ok {
			b.WriteString("_t_" + t.Tag())
		}
		if d, ok := named.(reference.Digested); ok {
			enc := d.Digest().Encoded()
			b.WriteString("_d_" + enc[:min(16, len(enc))])
		}
		if _, tagged := named.(reference.Tagged); !tagged {
			if _, digested := named.(reference.Digested); !digested {
				b.WriteString("_t_latest")
			}
		}
		return sanitize(b.String())
	}
	s := strings.NewReplacer("/", "_s_", ":", "_c_").Replace(strings.ToLower(ref))
	if s = sanitize(s); s == "" {
		s = "-"
	}
	return s
}

// sanitize replaces every byte outside [a-z0-9_.-] with "-".
func sanitize(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '.' && c != '-' {
			b[i] = '-'
		}
	}
	return string(b)
}

func hash16(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// LockInput is what a runtime image's dependencies are: what the lock hash
// covers.
type LockInput struct {
	BaseDigest string           `json:"base_digest"`
	Plugins    []plugins.Recipe `json:"plugins"`
	// SetupSHA256 is the sha256 of the setup script, "" without one.
	SetupSHA256 string `json:"setup_sha256"`
	// Epoch is the clamp time of the layers (Unix seconds).
	Epoch int64 `json:"epoch"`
}

// LockHash is 16 hex digits of the sha256 of the input's canonical JSON.
func LockHash(in LockInput) string {
	if in.Plugins == nil {
		in.Plugins = []plugins.Recipe{}
	}
	b, _ := json.Marshal(in)
	return hash16(string(b))
}

// SourceHash is 16 hex digits of the hash of the executor layer's binaries
// (their sha256: the executor's, and bothy-plugin's in an image with
// plugins, "" otherwise) and the plugin code (the recipes the image was
// built with).
func SourceHash(executorSHA256, pluginServerSHA256 string, recipes []plugins.Recipe) string {
	if recipes == nil {
		recipes = []plugins.Recipe{}
	}
	b, _ := json.Marshal(struct {
		Executor     string           `json:"executor"`
		PluginServer string           `json:"plugin_server,omitempty"`
		Plugins      []plugins.Recipe `json:"plugins"`
	}{executorSHA256, pluginServerSHA256, recipes})
	return hash16(string(b))
}
