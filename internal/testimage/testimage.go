package testimage

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BusyboxPath is where Debian's busybox-static installs its binary.
const BusyboxPath = "/bin/busybox"

// epoch is the timestamp of every generated entry: same inputs, same digests.
var epoch = time.Unix(0, 0).UTC()

// BusyboxTar writes a root filesystem tarball: the static busybox, a symlink
// per applet, and the few files a shell expects.
func BusyboxTar(w io.Writer) error { return busyboxTar(w, busyboxExtras{}) }

// busyboxExtras are what an image made from busybox adds to it.
type busyboxExtras struct {
	passwd, group string            // lines appended
	dirs          []string          // made 0755, root's
	files         map[string]string // written 0644, root's
}

func busyboxTar(w io.Writer, extra busyboxExtras) error {
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return fmt.Errorf("read busybox (apt-get install busybox-static): %w", err)
	}
	out, err := exec.Command(BusyboxPath, "--list").Output()
	if err != nil {
		return fmt.Errorf("list busybox applets: %w", err)
	}
	applets := strings.Fields(string(out))
	slices.Sort(applets)

	tw := tar.NewWriter(w)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: epoch})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range append([]string{"bin", "dev", "etc", "proc", "root", "sys", "tmp", "usr", "usr/bin", "var", "var/tmp"}, extra.dirs...) {
		mode := int64(0o755)
		if d == "tmp" || d == "var/tmp" {
			mode = 0o1777
		}
		if err := dir(d, mode); err != nil {
			return err
		}
	}
	if err := file("bin/busybox", 0o755, bin); err != nil {
		return err
	}
	for _, a := range applets {
		if a == "busybox" {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: epoch}); err != nil {
			return err
		}
	}
	// A user's home owned by uid 1000: how ids are mapped shows in its owner.
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "home/", Mode: 0o755, ModTime: epoch}); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "home/user/", Mode: 0o750, Uid: 1000, Gid: 1000, ModTime: epoch}); err != nil {
		return err
	}
	for _, f := range []struct{ name, content string }{
		{"etc/group", "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n" + extra.group},
		{"etc/passwd", "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" + extra.passwd},
	} {
		if err := file(f.name, 0o644, []byte(f.content)); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(extra.files))
	for name := range extra.files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := file(name, 0o644, []byte(extra.files[name])); err != nil {
			return err
		}
	}
	return tw.Close()
}

// ArchiveOptions describe the image an OCI archive holds.
type ArchiveOptions struct {
	// Name is the ref.name annotation (e.g. "bothy-default:latest").
	Name       string
	Cmd        []string
	Env        []string
	Entrypoint []string
	User       string
	WorkingDir string
	Labels     map[string]string
}

// WriteOCIArchive packs a rootfs tarball into a one-layer OCI image and writes
// it as an OCI archive (a tarred OCI layout) to out. The result is
// reproducible: the same rootfs gives the same digests.
func WriteOCIArchive(rootfsTar, out string, opts ArchiveOptions) error {
	layer, err := tarball.LayerFromFile(rootfsTar, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return fmt.Errorf("read rootfs %s: %w", rootfsTar, err)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Cmd = opts.Cmd
	cfg.Config.Env = opts.Env
	cfg.Config.Entrypoint = opts.Entrypoint
	cfg.Config.User = opts.User
	cfg.Config.WorkingDir = opts.WorkingDir
	cfg.Config.Labels = opts.Labels
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	if img, err = mutate.CreatedAt(img, v1.Time{Time: epoch}); err != nil {
		return err
	}

	tmp, err := os.MkdirTemp(filepath.Dir(out), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": opts.Name})); err != nil {
		return fmt.Errorf("write OCI layout: %w", err)
	}
	return tarDir(tmp, out)
}

// tarDir writes dir's contents as a deterministic tarball at out, atomically.
func tarDir(dir, out string) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			paths = append(paths, path)
		}
		return nil
	}); err != nil {
		return err
	}
	slices.Sort(paths)
	tmp, err := os.CreateTemp(filepath.Dir(out), ".archive-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	for _, path := range paths {
		st, err := os.Lstat(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: epoch, Typeflag: tar.TypeReg, Size: st.Size()}
		if st.IsDir() {
			hdr = &tar.Header{Name: filepath.ToSlash(rel) + "/", Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !st.IsDir() {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// Every user of the machine reads the installed default image.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

// PadRootfs copies the rootfs tarball in to out and adds mb megabytes of
// incompressible (seeded, so reproducible) data under /opt/pad: a large image
// for the preparation benchmark.
func PadRootfs(in, out string, mb int) error {
	src, err := os.Open(in)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(out)
	if err != nil {
		return err
	}
	defer dst.Close()
	tr, tw := tar.NewReader(src), tar.NewWriter(dst)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", in, err)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "opt/pad/", Mode: 0o755, ModTime: epoch}); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20)
	for i := range mb / 8 {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("opt/pad/%03d.bin", i), Mode: 0o644, Size: 8 << 20, ModTime: epoch}); err != nil {
			return err
		}
		for range 8 {
			for j := 0; j < len(buf); j += 8 {
				binary.LittleEndian.PutUint64(buf[j:], rng.Uint64())
			}
			if _, err := tw.Write(buf); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// BusyboxArchive writes an OCI archive of the busybox image to out.
func BusyboxArchive(out, name string) error {
	return busyboxArchive(out, busyboxExtras{}, ArchiveOptions{Name: name, Cmd: []string{"/bin/sh"}, Env: []string{"PATH=/bin:/usr/bin"}})
}

// BusyboxArchiveWith writes an OCI archive of the busybox root filesystem
// with the config opts gives.
func BusyboxArchiveWith(out string, opts ArchiveOptions) error {
	return busyboxArchive(out, busyboxExtras{}, opts)
}

// HttpdPort is the port HttpdArchive's server listens on.
const HttpdPort = 8080

// HttpdArchive writes an OCI archive of a server image made the way a
// Docker user's is: busybox's httpd as Entrypoint and Cmd, serving
// /var/www (its WorkingDir) on HttpdPort as the user www (uid 101, gid 101,
// also in group adm) named in its User, with an Env of its own, logging
// each request on stderr.
func HttpdArchive(out, name string) error {
	return busyboxArchive(out, busyboxExtras{
		passwd: "www:x:101:101:web server:/home/www:/bin/false\n",
		group:  "www:x:101:\nadm:x:4:www\n",
		dirs:   []string{"var/www"},
		files:  map[string]string{"var/www/index.html": "hello from httpd\n"},
	}, ArchiveOptions{
		Name:       name,
		Entrypoint: []string{"/bin/httpd"},
		Cmd:        []string{"-f", "-vv", "-p", fmt.Sprint(HttpdPort), "-h", "/var/www"},
		Env:        []string{"PATH=/bin:/usr/bin", "GREETING=from the image"},
		User:       "www",
		WorkingDir: "/var/www",
	})
}

func busyboxArchive(out string, extra busyboxExtras, opts ArchiveOptions) error {
	var buf bytes.Buffer
	if err := busyboxTar(&buf, extra); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".busybox-rootfs-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return WriteOCIArchive(tmp.Name(), out, opts)
}
