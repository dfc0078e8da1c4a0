package rootfs

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

	"github.com/klauspost/compress/gzip"
)

func TestCheckLayer(t *testing.T) {
	good := mkTar(t, dirEnt("d/", 0o755), reg("d/f", "hello", 0o644), hardlink("d/g", "d/f"), symlink("d/s", "/etc/passwd"), reg("d/.wh.gone", "", 0))
	d, err := CheckLayer(bytes.NewReader(good))
	if err != nil || d.Encoded() != fmt.Sprintf("%x", sha256.Sum256(good)) {
		t.Errorf("CheckLayer(good) = %s, %v", d, err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good)
	zw.Close()
	if dz, err := CheckLayer(&gz); err != nil || dz != d {
		t.Errorf("CheckLayer(gzip) = %s, %v; want %s", dz, err, d)
	}
	for name, data := range map[string][]byte{
		"empty":    nil,
		"garbage":  bytes.Repeat([]byte("garbage!"), 200),
		"cut":      good[:len(good)/2],
		"dotdot":   mkTar(t, reg("../x", "x", 0o644)),
		"link out": mkTar(t, hardlink("x", "../../etc/shadow")),
		"gzip cut": gz.Bytes()[:10],
	} {
		if _, err := CheckLayer(bytes.NewReader(data)); !errors.Is(err, ErrMalformedLayer) {
			t.Errorf("CheckLayer(%s) = %v, want ErrMalformedLayer", name, err)
		}
	}
}

// FuzzCheckLayer: any bytes are either refused with ErrMalformedLayer or
// accepted with the diff ID of the stream, and what is accepted reads as a
// tar to its end.
func FuzzCheckLayer(f *testing.F) {
	f.Add(mkTar(f, reg("a", "x", 0o644)))
	f.Add(mkTar(f, dirEnt("d/", 0o755), reg("d/.wh..wh..opq", "", 0), hardlink("d/b", "d/a")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := CheckLayer(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrMalformedLayer) {
				t.Fatalf("error %v is not ErrMalformedLayer", err)
			}
			return
		}
		if len(data) > 0 && data[0] != 0x1f && data[0] != 0x28 && d.Encoded() != fmt.Sprintf("%x", sha256.Sum256(data)) {
			t.Fatalf("diff ID %s is not the stream's", d)
		}
		if data[0] != 0x1f && data[0] != 0x28 {
			tr := tar.NewReader(bytes.NewReader(data))
			for {
				_, err := tr.Next()
				if err != nil {
					if err.Error() != "EOF" {
						t.Fatalf("accepted, but: %v", err)
					}
					break
				}
			}
		}
	})
}
