package files

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestDownloadFile(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "notes.txt")
	os.WriteFile(p, []byte("hello\n"), 0o644)
	dl, err := OpenDownload(context.Background(), p, DownloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dl.Dir || dl.Name != "notes.txt" || dl.Size != 6 || dl.MIME != "text/plain; charset=utf-8" {
		t.Errorf("download %+v", dl)
	}
	var buf bytes.Buffer
	if err := dl.Stream(context.Background(), &buf); err != nil || buf.String() != "hello\n" {
		t.Errorf("stream %q %v", buf.String(), err)
	}
	if err := dl.Stream(context.Background(), &buf); err == nil {
		t.Error("second Stream succeeded")
	}

	img := filepath.Join(d, "img.png")
	os.WriteFile(img, pngBytes(t), 0o644)
	bin := filepath.Join(d, "blob")
	os.WriteFile(bin, []byte{0, 1, 2}, 0o644)
	for p, mime := range map[string]string{img: "image/png", bin: "application/octet-stream"} {
		dl, err := OpenDownload(context.Background(), p, DownloadOptions{})
		if err != nil || dl.MIME != mime {
			t.Errorf("%s: %+v %v", p, dl, err)
		}
		buf.Reset()
		dl.Stream(context.Background(), &buf)
		if want, _ := os.ReadFile(p); !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s: sniffing changed the stream", p)
		}
	}
	if _, err := OpenDownload(context.Background(), filepath.Join(d, "nope"), DownloadOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
}

func TestDownloadDirectoryRoundTrip(t *testing.T) {
	for _, format := range []ArchiveFormat{FormatAuto, FormatZip, FormatTar, FormatTarGz} {
		t.Run(string(format), func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "project")
			mkTree(t, src, "README.md", "src/main.go", "src/pkg/util.go", "empty/", ".hidden/config")
			os.Chmod(filepath.Join(src, "src", "main.go"), 0o755)
			os.Chmod(filepath.Join(src, "src", "pkg"), 0o750)
			os.Symlink("src/main.go", filepath.Join(src, "link"))
			os.WriteFile(filepath.Join(src, "binary.bin"), []byte{0, 1, 2, 255}, 0o600)

			dl, err := OpenDownload(context.Background(), src, DownloadOptions{Format: format})
			if err != nil {
				t.Fatal(err)
			}
			wantFormat := format
			if wantFormat == FormatAuto {
				wantFormat = FormatZip
			}
			if !dl.Dir || dl.Size != -1 || dl.Name != "project."+string(wantFormat) {
				t.Errorf("download %+v", dl)
			}
			var buf bytes.Buffer
			if err := dl.Stream(context.Background(), &buf); err != nil {
				t.Fatal(err)
			}
			dest := filepath.Join(t.TempDir(), "copy")
			if _, err := Extract(context.Background(), &buf, dest, ExtractOptions{TempDir: t.TempDir()}); err != nil {
				t.Fatal(err)
			}
			before, after := tree(t, src), tree(t, dest)
			for k, v := range before {
				if after[k] != v {
					t.Errorf("%s: %q, want %q", k, after[k], v)
				}
			}
			if len(after) != len(before) {
				t.Errorf("extracted %d entries, want %d: %v", len(after), len(before), after)
			}
		})
	}
}

func TestWriteArchiveErrors(t *testing.T) {
	d := t.TempDir()
	f := filepath.Join(d, "f")
	os.WriteFile(f, nil, 0o644)
	var buf bytes.Buffer
	if err := WriteArchive(context.Background(), &buf, f, FormatZip); !errors.Is(err, ErrNotDir) {
		t.Errorf("file: %v", err)
	}
	if err := WriteArchive(context.Background(), &buf, d, "7z"); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("format: %v", err)
	}
	if _, err := OpenDownload(context.Background(), d, DownloadOptions{Format: "7z"}); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("download format: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WriteArchive(ctx, &buf, d, FormatTar); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
