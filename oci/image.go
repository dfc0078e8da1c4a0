package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// Limits on the JSON blobs the store parses.
const (
	MaxManifestSize = 4 << 20
	maxConfigSize   = 32 << 20
)

// Docker schema 2 media types, accepted when reading for robustness; Pull
// always stores OCI.
const (
	mediaTypeDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerConfig   = "application/vnd.docker.container.image.v1+json"
)

// Image is one image in the store. It is a snapshot: later tags and removals
// do not change it.
type Image struct {
	Names   []string      // canonical names pointing at it, sorted; empty if dangling
	Digest  digest.Digest // manifest digest
	ID      digest.Digest // config digest (docker-like image ID)
	Created time.Time     // from the config; zero if absent
	Size    int64         // sum of the layer blob sizes (compressed)
	Config  v1.Image      // the image config (Entrypoint, Cmd, Env, WorkingDir, User, …)
	Layers  []Layer       // bottom first
}

// Layer is one layer of an image.
type Layer struct {
	Digest    digest.Digest // blob digest; open it with Store.OpenBlob
	DiffID    digest.Digest // digest of the uncompressed tar
	MediaType string        // e.g. application/vnd.oci.image.layer.v1.tar+gzip, …tar, …tar+zstd
	Size      int64         // blob size
}

// ShortID returns the first 12 hex digits of the image ID.
func (i *Image) ShortID() string {
	e := i.ID.Encoded()
	if len(e) > 12 {
		e = e[:12]
	}
	return e
}

// imageData is an image's verified manifest and config bytes.
type imageData struct {
	manifest []byte
	config   []byte
}

// imageData reads (once per process) and verifies an image's manifest and config.
func (s *Store) imageData(md digest.Digest) (*imageData, error) {
	s.mu.Lock()
	d := s.cache[md]
	s.mu.Unlock()
	if d != nil {
		return d, nil
	}
	mb, err := s.ReadBlob(md, MaxManifestSize)
	if err != nil {
		return nil, err
	}
	m, err := parseManifest(md, mb)
	if err != nil {
		return nil, err
	}
	cb, err := s.ReadBlob(m.Config.Digest, maxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", md, err)
	}
	d = &imageData{manifest: mb, config: cb}
	s.mu.Lock()
	s.cache[md] = d
	s.mu.Unlock()
	return d, nil
}

func parseManifest(md digest.Digest, b []byte) (*v1.Manifest, error) {
	var m v1.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %v: %w", md, err, ErrCorrupt)
	}
	switch m.MediaType {
	case v1.MediaTypeImageManifest, mediaTypeDockerManifest, "":
	default:
		return nil, fmt.Errorf("manifest %s: media type %q is not an image manifest: %w", md, m.MediaType, ErrCorrupt)
	}
	if m.SchemaVersion != 2 {
		return nil, fmt.Errorf("manifest %s: schema version %d: %w", md, m.SchemaVersion, ErrCorrupt)
	}
	switch m.Config.MediaType {
	case v1.MediaTypeImageConfig, mediaTypeDockerConfig:
	default:
		return nil, fmt.Errorf("manifest %s: config media type %q is not an image config: %w", md, m.Config.MediaType, ErrCorrupt)
	}
	if err := m.Config.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("manifest %s: config digest: %v: %w", md, err, ErrCorrupt)
	}
	for _, l := range m.Layers {
		if err := l.Digest.Validate(); err != nil {
			return nil, fmt.Errorf("manifest %s: layer digest: %v: %w", md, err, ErrCorrupt)
		}
	}
	return &m, nil
}

// buildImage assembles an Image from verified data; names are copied.
func buildImage(md digest.Digest, data *imageData, names []string) (*Image, error) {
	m, err := parseManifest(md, data.manifest)
	if err != nil {
		return nil, err
	}
	img := &Image{Names: slices.Clone(names), Digest: md, ID: m.Config.Digest}
	if img.Names == nil {
		img.Names = []string{}
	}
	slices.Sort(img.Names)
	if err := json.Unmarshal(data.config, &img.Config); err != nil {
		return nil, fmt.Errorf("image %s: config %s: %v: %w", md, m.Config.Digest, err, ErrCorrupt)
	}
	if img.Config.Created != nil {
		img.Created = *img.Config.Created
	}
	diffIDs := img.Config.RootFS.DiffIDs
	if len(diffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("image %s: %d layers but %d diff IDs: %w", md, len(m.Layers), len(diffIDs), ErrCorrupt)
	}
	for i, l := range m.Layers {
		img.Layers = append(img.Layers, Layer{Digest: l.Digest, DiffID: diffIDs[i], MediaType: l.MediaType, Size: l.Size})
		img.Size += l.Size
	}
	return img, nil
}

// errGone: an image was removed (and maybe pruned) while being read.
var errGone = fmt.Errorf("image removed while being read: %w", ErrNotFound)

// current loads image md of the snapshot db. Readers take no lock, so a
// concurrent Remove and Prune may delete the blobs of an image db still
// lists: on a missing blob, current re-reads the refs database and returns
// errGone if the image is no longer there, or retries once if it is (it
// may have been pulled again).
func (s *Store) current(md digest.Digest, db *refsDB) (*Image, error) {
	img, err := s.image(md, db)
	if err == nil || !errors.Is(err, ErrNotFound) {
		return img, err
	}
	fresh, rerr := s.readRefs()
	if rerr != nil {
		return nil, rerr
	}
	if _, ok := fresh.Images[md]; !ok {
		return nil, errGone
	}
	return s.image(md, fresh)
}

// image loads image md with the names db gives it.
func (s *Store) image(md digest.Digest, db *refsDB) (*Image, error) {
	data, err := s.imageData(md)
	if err != nil {
		return nil, err
	}
	var names []string
	if rec := db.Images[md]; rec != nil {
		names = rec.Names
	}
	return buildImage(md, data, names)
}

// Resolve finds an image by name ("busybox", "foo:1", "localhost/foo",
// "ghcr.io/x/y@sha256:…"), by full manifest digest or image ID ("sha256:…"),
// or by a prefix of at least 4 hex digits of its ID ("sha256:" optional). A
// short name tries localhost/ first, then docker.io. It returns an error
// wrapping ErrNotFound or ErrAmbiguous when nothing or several images match.
func (s *Store) Resolve(ctx context.Context, ref string) (*Image, error) {
	db, err := s.readRefs()
	if err != nil {
		return nil, err
	}
	md, err := s.resolve(db, ref)
	if err != nil {
		return nil, err
	}
	img, err := s.current(md, db)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", ref, err)
	}
	return img, nil
}

func (s *Store) resolve(db *refsDB, ref string) (digest.Digest, error) {
	if ref == "" {
		return "", fmt.Errorf("resolve image: empty reference: %w", ErrInvalidName)
	}
	// A full digest: a manifest digest or an image ID.
	if d, err := digest.Parse(ref); err == nil {
		if _, ok := db.Images[d]; ok {
			return d, nil
		}
		return s.matchID(db, ref, func(id digest.Digest) bool { return id == d })
	}
	// A name.
	for _, n := range nameCandidates(ref) {
		if d, ok := db.lookup(n); ok {
			return d, nil
		}
		// name@digest also finds the image with that manifest digest if
		// it has a name in the same repository.
		if i := strings.LastIndexByte(n, '@'); i > 0 {
			d := digest.Digest(n[i+1:])
			if rec := db.Images[d]; rec != nil {
				repo := n[:i]
				for _, have := range rec.Names {
					if repository(have) == repo {
						return d, nil
					}
				}
			}
		}
	}
	// An ID prefix.
	hex := strings.TrimPrefix(ref, digest.Canonical.String()+":")
	if len(hex) >= 4 && len(hex) <= 64 && isLowerHex(hex) {
		if len(hex) == 64 {
			if _, ok := db.Images[digest.NewDigestFromEncoded(digest.Canonical, hex)]; ok {
				return digest.NewDigestFromEncoded(digest.Canonical, hex), nil
			}
		}
		return s.matchID(db, ref, func(id digest.Digest) bool {
			return id.Algorithm() == digest.Canonical && strings.HasPrefix(id.Encoded(), hex)
		})
	}
	return "", fmt.Errorf("image %s: %w", ref, ErrNotFound)
}

// matchID returns the one image whose config digest satisfies match.
func (s *Store) matchID(db *refsDB, ref string, match func(digest.Digest) bool) (digest.Digest, error) {
	var found []digest.Digest
	for md := range db.Images {
		id, err := s.configDigest(md)
		if err != nil {
			continue // an unreadable image cannot be matched by ID; List reports it
		}
		if match(id) {
			found = append(found, md)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("image %s: %w", ref, ErrNotFound)
	case 1:
		return found[0], nil
	default:
		slices.Sort(found)
		return "", fmt.Errorf("image %s matches %d images (%v): %w", ref, len(found), found, ErrAmbiguous)
	}
}

func (s *Store) configDigest(md digest.Digest) (digest.Digest, error) {
	data, err := s.imageData(md)
	if err != nil {
		return "", err
	}
	m, err := parseManifest(md, data.manifest)
	if err != nil {
		return "", err
	}
	return m.Config.Digest, nil
}

func isLowerHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// List returns every image in the store, newest first. Images that cannot be
// read are left out and reported in the error, which may come with a
// non-empty list.
func (s *Store) List(ctx context.Context) ([]*Image, error) {
	db, err := s.readRefs()
	if err != nil {
		return nil, err
	}
	var out []*Image
	var errs []error
	for md := range db.Images {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		img, err := s.current(md, db)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list image %s: %w", md, err))
			continue
		}
		out = append(out, img)
	}
	slices.SortFunc(out, func(a, b *Image) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(string(a.Digest), string(b.Digest))
	})
	return out, errors.Join(errs...)
}

// Remove untags an image. Given a name, it removes that name, and the image
// too if that was its last name; given a digest or ID (prefix), it removes the
// image with all its names. Blobs stay until Prune.
func (s *Store) Remove(ctx context.Context, ref string) error {
	return s.updateRefs(ctx, func(db *refsDB) error {
		for _, n := range nameCandidates(ref) {
			if d, ok := db.lookup(n); ok {
				db.untag(n)
				if len(db.Images[d].Names) == 0 {
					delete(db.Images, d)
				}
				return nil
			}
		}
		md, err := s.resolve(db, ref)
		if err != nil {
			return fmt.Errorf("remove image: %w", err)
		}
		delete(db.Images, md)
		return nil
	})
}

// Tag gives the image src resolves to the name newName (local rules: "foo"
// is "localhost/foo:latest"), taking it from any image that had it.
func (s *Store) Tag(ctx context.Context, src, newName string) error {
	name, err := NormalizeLocalName(newName)
	if err != nil {
		return fmt.Errorf("tag %s: %w", src, err)
	}
	gc, err := lockFile(ctx, s.gcLockPath(), false)
	if err != nil {
		return fmt.Errorf("tag %s: %w", src, err)
	}
	defer gc.Unlock()
	return s.updateRefs(ctx, func(db *refsDB) error {
		md, err := s.resolve(db, src)
		if err != nil {
			return fmt.Errorf("tag %s: %w", src, err)
		}
		if err := checkDigestNames([]string{name}, md, ""); err != nil {
			return fmt.Errorf("tag %s: %w", src, err)
		}
		db.add(md, name)
		return nil
	})
}

// reachable returns every blob the images of db use.
func (s *Store) reachable(db *refsDB) (map[digest.Digest]bool, error) {
	keep := map[digest.Digest]bool{}
	for md := range db.Images {
		data, err := s.imageData(md)
		if err != nil {
			return nil, fmt.Errorf("image %s (remove it to prune): %w", md, err)
		}
		m, err := parseManifest(md, data.manifest)
		if err != nil {
			return nil, err
		}
		keep[md] = true
		keep[m.Config.Digest] = true
		for _, l := range m.Layers {
			keep[l.Digest] = true
		}
	}
	return keep, nil
}

// Verify re-reads every blob of every image and checks its digest and size.
// It reports all problems found, each naming the image and blob.
func (s *Store) Verify(ctx context.Context) error {
	db, err := s.readRefs()
	if err != nil {
		return err
	}
	var errs []error
	for md := range db.Images {
		s.mu.Lock()
		delete(s.cache, md) // re-read and re-verify manifest and config
		s.mu.Unlock()
		img, err := s.current(md, db)
		if errors.Is(err, errGone) {
			continue
		}
		if err == nil {
			err = s.verifyConfigSize(md)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("verify image %s: %w", md, err))
			continue
		}
		for _, l := range img.Layers {
			if err := ctx.Err(); err != nil {
				return err
			}
			r, size, err := s.openBlob(l.Digest)
			if err != nil {
				if errors.Is(err, ErrNotFound) {
					if fresh, ferr := s.readRefs(); ferr == nil && fresh.Images[md] == nil {
						break // removed and pruned meanwhile
					}
				}
				errs = append(errs, fmt.Errorf("verify image %s: %w", md, err))
				continue
			}
			_, err = io.Copy(io.Discard, r)
			r.Close()
			if err != nil {
				errs = append(errs, fmt.Errorf("verify image %s: %w", md, err))
			} else if size != l.Size {
				errs = append(errs, fmt.Errorf("verify image %s: blob %s: %d bytes, manifest says %d: %w", md, l.Digest, size, l.Size, ErrCorrupt))
			}
		}
	}
	return errors.Join(errs...)
}

// CommitImage checks that image md, whose blobs a copy has just written, is
// complete in the store (manifest and config verified, config and layers
// present with the sizes the manifest gives), then records it with names.
// A name that carries a digest ("repo@sha256:…") must carry md. The caller
// holds the store (Hold).
func (s *Store) CommitImage(ctx context.Context, md digest.Digest, names []string) (*Image, error) {
	return s.CommitImageVia(ctx, md, "", names)
}

// CommitImageVia is CommitImage for an image reached from a verified
// digest: via is the digest of the manifest or index a pull was pinned to
// (a reference's digest, an index.json entry), checked against the bytes
// fetched, from which md was reached through verified descriptors (an
// index's instance; a manifest converted to OCI). Names may carry md or via.
func (s *Store) CommitImageVia(ctx context.Context, md, via digest.Digest, names []string) (*Image, error) {
	if md == "" {
		return nil, errors.New("no manifest was written")
	}
	if err := checkDigestNames(names, md, via); err != nil {
		return nil, err
	}
	data, err := s.imageData(md)
	if err != nil {
		return nil, err
	}
	m, err := parseManifest(md, data.manifest)
	if err != nil {
		return nil, err
	}
	img, err := buildImage(md, data, nil)
	if err != nil {
		return nil, err
	}
	if err := VerifyBytes(m.Config, data.config); err != nil {
		return nil, fmt.Errorf("image %s: %w", md, err)
	}
	for _, l := range m.Layers {
		if err := s.checkStored(l); err != nil {
			return nil, fmt.Errorf("image %s: %w", md, err)
		}
	}
	// Make the blobs' directory entries durable before a ref points at them.
	dirs := map[string]bool{}
	for _, d := range append([]digest.Digest{md, img.ID}, layerDigests(img)...) {
		dirs[s.blobDir(d.Algorithm())] = true
	}
	for dir := range dirs {
		if err := syncDir(dir); err != nil {
			return nil, err
		}
	}
	err = s.updateRefs(ctx, func(db *refsDB) error {
		db.add(md, names...)
		img.Names = append([]string{}, db.Images[md].Names...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return img, nil
}

// checkStored checks that the blob desc names is in the store with desc's
// size. Its content matches its digest: every blob is verified when written.
func (s *Store) checkStored(desc v1.Descriptor) error {
	size, ok := s.HasBlob(desc.Digest, -1)
	if !ok {
		return fmt.Errorf("%s %s missing after copy: %w", kindOf(desc.MediaType), desc.Digest, ErrNotFound)
	}
	if size != desc.Size {
		return &MismatchError{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, Actual: desc.Digest, ActualSize: size}
	}
	return nil
}

// checkDigestNames refuses a name that pins a digest other than md or via:
// IMAGE@sha256:… must mean the content that has that digest.
func checkDigestNames(names []string, md, via digest.Digest) error {
	for _, n := range names {
		i := strings.LastIndexByte(n, '@')
		if i < 0 {
			continue
		}
		d := digest.Digest(n[i+1:])
		if d != md && (via == "" || d != via) {
			return fmt.Errorf("%w: %s pins %s, but the image's manifest is %s", ErrInvalidName, n, d, md)
		}
	}
	return nil
}

// verifyConfigSize checks image md's config against its descriptor's size
// (its digest is checked whenever it is read).
func (s *Store) verifyConfigSize(md digest.Digest) error {
	data, err := s.imageData(md)
	if err != nil {
		return err
	}
	m, err := parseManifest(md, data.manifest)
	if err != nil {
		return err
	}
	return VerifyBytes(m.Config, data.config)
}

func layerDigests(img *Image) []digest.Digest {
	out := make([]digest.Digest, len(img.Layers))
	for i, l := range img.Layers {
		out[i] = l.Digest
	}
	return out
}
