package rootfs

import (
	"archive/tar"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
)

// ErrMalformedLayer: a layer tar that cannot be read to its end, or whose
// entries no unpack would take.
var ErrMalformedLayer = errors.New("malformed layer")

// CheckLayer reads a layer blob (an uncompressed, gzip or zstd tar) to its
// end and returns its diff ID, the sha256 of the uncompressed stream; it
// fails with ErrMalformedLayer for an empty file, a stream that is not a
// tar, one cut short, an entry name with a ".." component or a NUL, a hard
// link to such a name, or an entry type a layer has no place for. Unpack
// checks every entry again as it writes it; this is the early, clear
// refusal of a bad file before anything is made from it.
func CheckLayer(r io.Reader) (digest.Digest, error) {
	zr, err := Decompress(r)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrMalformedLayer, err)
	}
	defer zr.Close()
	h := sha256.New()
	cr := &countReader{r: io.TeeReader(zr, h)}
	tr := tar.NewReader(cr)
	entries := 0
	var end int64 // where the last entry's data (padded to a block) ends
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			// A tar ends with two zero blocks; archive/tar also
			// says EOF for one cut at an entry's end.
			if cr.n > 0 && cr.n < end+2*512 {
				return "", fmt.Errorf("%w: tar archive cut short after %d entries (no end-of-archive blocks)", ErrMalformedLayer, entries)
			}
			break
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			if cr.n == 0 {
				return "", fmt.Errorf("%w: empty file, not a tar archive", ErrMalformedLayer)
			}
			return "", fmt.Errorf("%w: not a tar archive, or cut short (after %d entries, byte %d): %w", ErrMalformedLayer, entries, cr.n, err)
		}
		if _, err := cleanName(hdr.Name); err != nil {
			return "", fmt.Errorf("%w: entry %q: %w", ErrMalformedLayer, hdr.Name, err)
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeFifo, tar.TypeGNUSparse, tar.TypeCont:
		case tar.TypeLink:
			if _, err := cleanName(hdr.Linkname); err != nil || hdr.Linkname == "" {
				return "", fmt.Errorf("%w: entry %q: hard link to %q", ErrMalformedLayer, hdr.Name, hdr.Linkname)
			}
		default:
			return "", fmt.Errorf("%w: entry %q: type %q has no place in a layer", ErrMalformedLayer, hdr.Name, hdr.Typeflag)
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return "", fmt.Errorf("%w: entry %q cut short: %w", ErrMalformedLayer, hdr.Name, err)
		}
		entries++
		end = (cr.n + 511) &^ 511
	}
	if cr.n == 0 {
		return "", fmt.Errorf("%w: empty file, not a tar archive", ErrMalformedLayer)
	}
	// The diff ID covers the whole stream, as the layer cache hashes it.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return "", fmt.Errorf("%w: %w", ErrMalformedLayer, err)
	}
	return digest.NewDigest(digest.SHA256, h), nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
