package transfer

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/types"

	"github.com/bothy-sandbox/bothy/oci"
)

// SaveOptions configures Save.
type SaveOptions struct {
	// AuthFile and TLSVerify apply to a docker:// destination, as in PullOptions.
	AuthFile  string
	TLSVerify *bool
	// Progress receives human-readable progress; nil is quiet.
	Progress io.Writer
	// Name is the name the caller gave the image by, when ref is its
	// digest: an archive destination that names no image gets it (see
	// namedArchive).
	Name string
}

// Save copies the image ref resolves to out of the store to dest, which must
// name its transport: "oci-archive:/x.tar[:name]", "oci:/dir[:name]",
// "docker-archive:/x.tar[:name:tag]" or "docker://registry/repo:tag" (a
// push). Blobs are verified as they are read. OCI destinations get the
// stored manifest unchanged (same digest).
func Save(ctx context.Context, s *oci.Store, ref, dest string, opts SaveOptions) error {
	if i := strings.IndexByte(dest, ':'); i <= 0 || transports[dest[:i]] == nil {
		return fmt.Errorf("save %s: destination %q has no transport (oci:, oci-archive:, docker-archive:, docker://): %w", ref, dest, oci.ErrInvalidName)
	}
	release, err := s.Hold(ctx)
	if err != nil {
		return fmt.Errorf("save %s: %w", ref, err)
	}
	defer release()
	img, err := s.Resolve(ctx, ref)
	if err != nil {
		return fmt.Errorf("save %s: %w", ref, err)
	}
	given := ref
	if opts.Name != "" {
		given = opts.Name
	}
	destRef, err := ParseReference(namedArchive(dest, given, img))
	if err != nil {
		return fmt.Errorf("save %s: %w", ref, err)
	}
	destSys, err := sourceContext(s, opts.AuthFile, opts.TLSVerify, "")
	if err != nil {
		return fmt.Errorf("save %s: %w", ref, err)
	}
	pc, err := policyContext()
	if err != nil {
		return fmt.Errorf("save %s: %w", ref, err)
	}
	defer pc.Destroy()
	copyOpts := &copy.Options{
		ReportWriter:   opts.Progress,
		SourceCtx:      &types.SystemContext{BigFilesTemporaryDir: s.TmpDir(), BlobInfoCacheDir: s.CacheDir()},
		DestinationCtx: destSys,
	}
	if _, err := copy.Image(ctx, pc, destRef, storeRef{s: s, digest: img.Digest}, copyOpts); err != nil {
		return fmt.Errorf("save %s to %s: %w", ref, dest, err)
	}
	return nil
}

// namedArchive adds the image's name to an archive destination that names
// none ("oci-archive:/x.tar" → "oci-archive:/x.tar:localhost/app:1"), as
// podman save does: the archive then carries it (the OCI ref.name
// annotation, Docker's RepoTags) and bothy load names the image again. The
// name is ref's when ref names the image, else its first; an image without
// a name (or with a digest only) leaves dest as it is.
func namedArchive(dest, ref string, img *oci.Image) string {
	kind, within, _ := strings.Cut(dest, ":")
	switch kind {
	case "oci-archive", "oci", "docker-archive":
	default:
		return dest
	}
	if strings.Contains(within, ":") {
		return dest // named already
	}
	var names []string
	for _, n := range img.Names {
		if !strings.Contains(n, "@") {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return dest
	}
	name := names[0]
	for _, normalize := range []func(string) (string, error){oci.NormalizeLocalName, oci.NormalizeName} {
		if n, err := normalize(ref); err == nil && slices.Contains(names, n) {
			name = n
			break
		}
	}
	return dest + ":" + name
}
