package oci

import (
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"strings"

	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// MismatchError is content that does not match the descriptor naming it: an
// index.json entry, an index's instance, a manifest's config or layer, or a
// digest a pull was pinned to. It wraps ErrCorrupt.
type MismatchError struct {
	// MediaType, Digest and Size are the descriptor's: what was claimed.
	// Size is -1 when the claim has no size (a digest in a reference).
	MediaType string
	Digest    digest.Digest
	Size      int64
	// Actual and ActualSize are the content's. Actual is empty when the
	// content was refused before its end (longer than Size); ActualSize is
	// then the bytes read so far.
	Actual     digest.Digest
	ActualSize int64
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	b.WriteString(kindOf(e.MediaType))
	if e.MediaType != "" {
		b.WriteString(" " + e.MediaType)
	}
	b.WriteString(" " + e.Digest.String())
	if e.Size >= 0 {
		fmt.Fprintf(&b, " (%d bytes)", e.Size)
	}
	b.WriteString(": content does not match: ")
	if e.Actual == "" {
		b.WriteString("it is longer")
	} else {
		fmt.Fprintf(&b, "it is %s (%d bytes)", e.Actual, e.ActualSize)
	}
	return b.String()
}

// Unwrap makes a MismatchError match ErrCorrupt.
func (e *MismatchError) Unwrap() error { return ErrCorrupt }

// kindOf names what a media type describes, for messages.
func kindOf(mediaType string) string {
	switch {
	case mediaType == v1.MediaTypeImageIndex || strings.Contains(mediaType, "manifest.list"):
		return "index"
	case strings.Contains(mediaType, "manifest"):
		return "manifest"
	case strings.Contains(mediaType, "config"):
		return "config"
	case strings.Contains(mediaType, "layer") || strings.Contains(mediaType, "rootfs"):
		return "layer"
	}
	return "blob"
}

// Descriptor returns a descriptor for a digest with no known size or type
// (a digest in a reference), for VerifyBytes and VerifyReader.
func Descriptor(mediaType string, d digest.Digest) v1.Descriptor {
	return v1.Descriptor{MediaType: mediaType, Digest: d, Size: -1}
}

// VerifyBytes checks b against desc: its digest (in desc's algorithm) and,
// when desc.Size >= 0, its size; and, when both declare one, that the media
// type inside b (a manifest's or index's mediaType field) is desc's. A
// mismatch is a *MismatchError.
func VerifyBytes(desc v1.Descriptor, b []byte) error {
	if err := desc.Digest.Validate(); err != nil {
		return fmt.Errorf("%s %s: %v: %w", kindOf(desc.MediaType), desc.Digest, err, ErrCorrupt)
	}
	actual := desc.Digest.Algorithm().FromBytes(b)
	if actual != desc.Digest || (desc.Size >= 0 && int64(len(b)) != desc.Size) {
		return &MismatchError{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, Actual: actual, ActualSize: int64(len(b))}
	}
	return checkMediaType(desc, b)
}

// checkMediaType refuses a manifest or index whose own mediaType field is
// not the one its descriptor gives.
func checkMediaType(desc v1.Descriptor, b []byte) error {
	if desc.MediaType == "" {
		return nil
	}
	switch kindOf(desc.MediaType) {
	case "manifest", "index":
	default:
		return nil
	}
	var head struct {
		MediaType string `json:"mediaType"`
	}
	if json.Unmarshal(b, &head) != nil || head.MediaType == "" || head.MediaType == desc.MediaType {
		return nil // a parser reports malformed JSON; the field is optional in OCI
	}
	return fmt.Errorf("%s %s: descriptor says %s, content says %s: %w", kindOf(desc.MediaType), desc.Digest, desc.MediaType, head.MediaType, ErrCorrupt)
}

// VerifyReader returns a reader of r that checks the content against desc:
// reading more than desc.Size bytes (when desc.Size >= 0) fails at once,
// and at the end a wrong size or digest fails in place of io.EOF. The
// errors are *MismatchError.
func VerifyReader(r io.Reader, desc v1.Descriptor) (io.Reader, error) {
	if err := desc.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("%s %s: %v: %w", kindOf(desc.MediaType), desc.Digest, err, ErrCorrupt)
	}
	return &verifyingReader{r: r, desc: desc, h: desc.Digest.Algorithm().Hash()}, nil
}

type verifyingReader struct {
	r    io.Reader
	desc v1.Descriptor
	h    hash.Hash
	n    int64
	err  error // sticky
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.desc.Size >= 0 && int64(len(p)) > v.desc.Size-v.n+1 {
		p = p[:v.desc.Size-v.n+1] // never read far past the claimed end
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.desc.Size >= 0 && v.n > v.desc.Size {
		v.err = &MismatchError{MediaType: v.desc.MediaType, Digest: v.desc.Digest, Size: v.desc.Size, ActualSize: v.n}
		return n, v.err
	}
	if err == io.EOF {
		actual := digest.NewDigest(v.desc.Digest.Algorithm(), v.h)
		if actual != v.desc.Digest || (v.desc.Size >= 0 && v.n != v.desc.Size) {
			err = &MismatchError{MediaType: v.desc.MediaType, Digest: v.desc.Digest, Size: v.desc.Size, Actual: actual, ActualSize: v.n}
		}
	}
	if err != nil {
		v.err = err
	}
	return n, err
}
