package transfer

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker"
	dockerarchive "go.podman.io/image/v5/docker/archive"
	"go.podman.io/image/v5/manifest"
	ociarchive "go.podman.io/image/v5/oci/archive"
	"go.podman.io/image/v5/oci/layout"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"

	"github.com/bothy-sandbox/bothy/oci"
)

// PullOptions configures Pull.
type PullOptions struct {
	// AuthFile is a containers-auth.json(5) file; empty means the default
	// ($XDG_RUNTIME_DIR/containers/auth.json, ~/.docker/config.json, …).
	AuthFile string
	// TLSVerify, if set to false, skips TLS verification and allows plain
	// HTTP for docker:// registries. Nil means the registries.conf default
	// (verify).
	TLSVerify *bool
	// Progress receives human-readable progress (stderr in the CLI); nil is quiet.
	Progress io.Writer
	// Platform picks an image from a multi-platform index: "os/arch" or
	// "os/arch/variant". Empty means the host's.
	Platform string
	// Name, if set, is the name recorded for the image (local rules:
	// "foo" is "localhost/foo:latest") instead of the one derived from the
	// reference. Images from oci: and oci-archive: get no name otherwise.
	Name string
}

// transports are the containers/image transports bothy uses; importing
// only these keeps containers-storage and friends out of the binary.
var transports = map[string]types.ImageTransport{
	docker.Transport.Name():        docker.Transport,
	layout.Transport.Name():        layout.Transport,
	ociarchive.Transport.Name():    ociarchive.Transport,
	dockerarchive.Transport.Name(): dockerarchive.Transport,
}

// ParseReference parses an image reference with an optional transport:
// "docker://…", "oci:/dir[:name]", "oci-archive:/file.tar[:name]",
// "docker-archive:/file.tar[:name:tag]". Without one it is a registry
// reference: "busybox" and "localhost:5000/x:1" mean "docker://…".
func ParseReference(ref string) (types.ImageReference, error) {
	if ref == "" {
		return nil, fmt.Errorf("parse image reference: %w: empty", oci.ErrInvalidName)
	}
	if i := strings.IndexByte(ref, ':'); i > 0 {
		if t, ok := transports[ref[:i]]; ok {
			rest := ref[i+1:]
			// "docker:latest" is the docker image, not the docker transport.
			if t != docker.Transport || strings.HasPrefix(rest, "//") {
				r, err := t.ParseReference(rest)
				if err != nil {
					return nil, fmt.Errorf("parse image reference %q: %w", ref, err)
				}
				return r, nil
			}
		}
	}
	if strings.Contains(ref, "://") {
		return nil, fmt.Errorf("parse image reference %q: %w: unknown transport", ref, oci.ErrInvalidName)
	}
	r, err := docker.ParseReference("//" + ref)
	if err != nil {
		return nil, fmt.Errorf("parse image reference %q: %w", ref, err)
	}
	return r, nil
}

// Pull copies an image from any transport into the store and records its
// name: for docker:// the normalized reference ("busybox" →
// "docker.io/library/busybox:latest"), for docker-archive: the name in the
// reference if any, else opts.Name. Layers the store already has are not
// fetched again. A failed pull records nothing and, when no other writer is
// busy, removes the blobs it added.
func Pull(ctx context.Context, s *oci.Store, ref string, opts PullOptions) (*oci.Image, error) {
	src, err := ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	var names []string
	if opts.Name != "" {
		n, err := oci.NormalizeLocalName(opts.Name)
		if err != nil {
			return nil, fmt.Errorf("pull %s: %w", ref, err)
		}
		names = append(names, n)
	} else if dr := src.DockerReference(); dr != nil {
		n, err := oci.NormalizeName(dr.String())
		if err != nil {
			return nil, fmt.Errorf("pull %s: %w", ref, err)
		}
		names = append(names, n)
	} else if n := layoutImageName(src); n != "" {
		names = append(names, n)
	}
	sys, err := sourceContext(s, opts.AuthFile, opts.TLSVerify, opts.Platform)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	img, err := copyIn(ctx, s, src, sys, opts.Progress, names)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	return img, nil
}

// layoutImageName names an image pulled from an OCI layout or archive, as
// podman does: the image part of the reference (oci-archive:x.tar:busybox:1),
// else the ref.name annotation of the layout's only image when that is a full
// name rather than a bare tag. "" leaves the image unnamed.
func layoutImageName(src types.ImageReference) string {
	kind := src.Transport().Name()
	if kind != layout.Transport.Name() && kind != ociarchive.Transport.Name() {
		return ""
	}
	path, image, _ := strings.Cut(src.StringWithinTransport(), ":")
	if image == "" {
		image = soleRefName(path, kind == ociarchive.Transport.Name())
	}
	if !strings.ContainsAny(image, ":/") {
		return "" // a bare tag ("latest") names no repository
	}
	n, err := oci.NormalizeLocalName(image)
	if err != nil {
		return ""
	}
	return n
}

// soleRefName returns the ref.name annotation of the only manifest in an OCI
// layout directory or archive's index.json.
func soleRefName(path string, archive bool) string {
	idx, err := readLayoutIndex(path, archive)
	if err != nil || len(idx.Manifests) != 1 {
		return ""
	}
	return idx.Manifests[0].Annotations[v1.AnnotationRefName]
}

// readLayoutIndex reads the index.json of an OCI layout directory or archive
// (the last one, as extraction would leave it).
func readLayoutIndex(path string, archive bool) (*v1.Index, error) {
	var data []byte
	if archive {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, err := oci.Decompress(f)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read archive: %w", err)
			}
			if strings.TrimPrefix(h.Name, "./") == v1.ImageIndexFile {
				if data, err = io.ReadAll(io.LimitReader(tr, oci.MaxManifestSize+1)); err != nil {
					return nil, err
				}
			}
		}
		if data == nil {
			return nil, errors.New("not an OCI archive: no index.json")
		}
	} else {
		var err error
		if data, err = os.ReadFile(filepath.Join(path, v1.ImageIndexFile)); err != nil {
			return nil, err
		}
	}
	if len(data) > oci.MaxManifestSize {
		return nil, errors.New("index.json too large")
	}
	var idx v1.Index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	return &idx, nil
}

// sourceTop returns the descriptor that src's top-level manifest or index
// must match: the digest of a docker:// reference, the index.json entry of an
// oci: layout or oci-archive:; nil when nothing names it (a tag, a docker
// archive).
func sourceTop(src types.ImageReference) (*v1.Descriptor, error) {
	switch src.Transport().Name() {
	case docker.Transport.Name():
		return pinnedDescriptor(src), nil
	case layout.Transport.Name():
		d, err := layout.LoadManifestDescriptor(src)
		if err != nil {
			return nil, fmt.Errorf("read index.json: %w", err)
		}
		return &d, nil
	case ociarchive.Transport.Name():
		path, image, _ := strings.Cut(src.StringWithinTransport(), ":")
		idx, err := readLayoutIndex(path, true)
		if err != nil {
			return nil, err
		}
		d, err := selectManifest(idx, image)
		if err != nil {
			return nil, err
		}
		return &d, nil
	}
	return nil, nil
}

// selectManifest picks the index.json entry an oci-archive: reference means,
// by containers/image's rule: the entry whose ref.name is image, else the
// only entry. (Should the two ever disagree, the manifest containers/image
// reads does not match this descriptor and the pull is refused.)
func selectManifest(idx *v1.Index, image string) (v1.Descriptor, error) {
	if image == "" {
		if len(idx.Manifests) != 1 {
			return v1.Descriptor{}, fmt.Errorf("index.json lists %d images: name one", len(idx.Manifests))
		}
		return idx.Manifests[0], nil
	}
	for _, d := range idx.Manifests {
		if d.Annotations[v1.AnnotationRefName] == image {
			switch d.MediaType {
			case v1.MediaTypeImageManifest, v1.MediaTypeImageIndex, manifest.DockerV2Schema2MediaType, manifest.DockerV2ListMediaType:
				return d, nil
			}
		}
	}
	return v1.Descriptor{}, fmt.Errorf("index.json has no image %q: %w", image, oci.ErrNotFound)
}

// ImportArchive imports the image in an OCI layout directory, an OCI archive
// or a docker archive (docker save output, optionally compressed), and names
// it name (local rules; empty leaves it unnamed). The archive must hold
// exactly one image.
func ImportArchive(ctx context.Context, s *oci.Store, path string, name string) (*oci.Image, error) {
	t, err := archiveTransport(path)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	var src types.ImageReference
	switch t {
	case layout.Transport:
		src, err = layout.NewReference(abs, "")
	case ociarchive.Transport:
		src, err = ociarchive.NewReference(abs, "")
	default:
		src, err = dockerarchive.NewReference(abs, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	var names []string
	if name != "" {
		n, err := oci.NormalizeLocalName(name)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", path, err)
		}
		names = append(names, n)
	} else {
		names = archiveNames(t, abs)
	}
	sys, err := sourceContext(s, "", nil, "")
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	img, err := copyIn(ctx, s, src, sys, nil, names)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	return img, nil
}

// archiveNames are the names an archive gives its only image, as podman
// load takes them: the ref.name annotation of an OCI layout or archive when
// it is a name rather than a bare tag (local rules: "app:1" is
// localhost/app:1), a docker archive's RepoTags (Docker's rules: "busybox"
// is docker.io/library/busybox). Names that do not parse are left out.
func archiveNames(t types.ImageTransport, path string) []string {
	if t != dockerarchive.Transport {
		src, err := layout.NewReference(path, "")
		if t == ociarchive.Transport {
			src, err = ociarchive.NewReference(path, "")
		}
		if err != nil {
			return nil
		}
		if n := layoutImageName(src); n != "" {
			return []string{n}
		}
		return nil
	}
	var names []string
	for _, tag := range dockerRepoTags(path) {
		if n, err := oci.NormalizeName(tag); err == nil && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// dockerRepoTags returns the RepoTags of the only image in a docker
// archive's manifest.json.
func dockerRepoTags(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	r, err := oci.Decompress(f)
	if err != nil {
		return nil
	}
	defer r.Close()
	tr := tar.NewReader(r)
	var data []byte
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if strings.TrimPrefix(h.Name, "./") == "manifest.json" {
			if data, err = io.ReadAll(io.LimitReader(tr, oci.MaxManifestSize+1)); err != nil {
				return nil
			}
		}
	}
	var m []struct{ RepoTags []string }
	if len(data) > oci.MaxManifestSize || json.Unmarshal(data, &m) != nil || len(m) != 1 {
		return nil
	}
	return m[0].RepoTags
}

// archiveTransport tells an OCI layout directory, an OCI archive and a
// docker archive apart by their marker files.
func archiveTransport(path string) (types.ImageTransport, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(path, v1.ImageLayoutFile)); err != nil {
			return nil, fmt.Errorf("not an OCI layout (no %s): %w", v1.ImageLayoutFile, oci.ErrInvalidName)
		}
		return layout.Transport, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := oci.Decompress(f)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	tr := tar.NewReader(r)
	var ociLayout, dockerManifest bool
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		switch strings.TrimPrefix(h.Name, "./") {
		case v1.ImageLayoutFile:
			ociLayout = true
		case "manifest.json":
			dockerManifest = true
		}
	}
	switch {
	case ociLayout:
		return ociarchive.Transport, nil
	case dockerManifest:
		return dockerarchive.Transport, nil
	}
	return nil, errors.New("neither an OCI archive (no oci-layout) nor a docker archive (no manifest.json)")
}

// sourceContext builds the SystemContext for reading images.
func sourceContext(s *oci.Store, authFile string, tlsVerify *bool, platform string) (*types.SystemContext, error) {
	sys := &types.SystemContext{
		AuthFilePath:            authFile,
		BigFilesTemporaryDir:    s.TmpDir(),
		BlobInfoCacheDir:        s.CacheDir(),
		DockerRegistryUserAgent: "bothy",
	}
	if tlsVerify != nil {
		sys.DockerInsecureSkipTLSVerify = types.NewOptionalBool(!*tlsVerify)
		sys.OCIInsecureSkipTLSVerify = !*tlsVerify
	}
	if platform != "" {
		p, err := oci.ParsePlatform(platform)
		if err != nil {
			return nil, err
		}
		sys.OSChoice, sys.ArchitectureChoice, sys.VariantChoice = p.OS, p.Architecture, p.Variant
	}
	return sys, nil
}

// policyContext accepts any image: bothy verifies digests, not signatures.
func policyContext() (*signature.PolicyContext, error) {
	return signature.NewPolicyContext(&signature.Policy{
		Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()},
	})
}

// copyIn copies src into the store under gc.lock (shared), checks the
// result and records names. On failure it records nothing and rolls back.
func copyIn(ctx context.Context, s *oci.Store, src types.ImageReference, sys *types.SystemContext, progress io.Writer, names []string) (img *oci.Image, err error) {
	release, err := s.Hold(ctx)
	if err != nil {
		return nil, err
	}
	dest := &storeDest{s: s}
	defer func() {
		release()
		if err != nil {
			_, created := dest.result()
			s.Rollback(created)
		}
	}()
	pc, err := policyContext()
	if err != nil {
		return nil, err
	}
	defer pc.Destroy()
	top, err := sourceTop(src)
	if err != nil {
		return nil, err
	}
	vsrc := newVerifiedRef(src, top)
	_, err = copy.Image(ctx, pc, storeRef{s: s, dest: dest}, vsrc, &copy.Options{
		RemoveSignatures:      true,
		ReportWriter:          progress,
		SourceCtx:             sys,
		DestinationCtx:        &types.SystemContext{BigFilesTemporaryDir: s.TmpDir(), BlobInfoCacheDir: s.CacheDir()},
		ForceManifestMIMEType: v1.MediaTypeImageManifest,
	})
	if err != nil {
		return nil, err
	}
	md, _ := dest.result()
	return s.CommitImageVia(ctx, md, vsrc.verified(), names)
}
