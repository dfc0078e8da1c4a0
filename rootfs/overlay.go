package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

var (
	// ErrOptionsTooLong is returned when overlay mount data would not fit
	// in the one page mount(2) copies from user space; the kernel would
	// silently cut it. [OverlayOptionsIn] with [MountIn] shortens it.
	ErrOptionsTooLong = errors.New("overlay mount options longer than a page")

	// ErrInvalidOverlay is returned for an overlay layout mount(2) cannot
	// express: no lower layer, an empty path or one with a NUL byte, an
	// upper directory without a work directory or the reverse.
	ErrInvalidOverlay = errors.New("invalid overlay layout")
)

// escapeOverlayPath escapes a path for overlay's option parser: "," ends an
// option, ":" separates lower layers, and "\" escapes the next byte.
func escapeOverlayPath(p string) string {
	if !strings.ContainsAny(p, `\,:`) {
		return p
	}
	var b strings.Builder
	b.Grow(len(p) + 8)
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == '\\' || c == ',' || c == ':' {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

func checkOverlayPath(what, p string) error {
	if p == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidOverlay, what)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%w: NUL byte in %s %q", ErrInvalidOverlay, what, p)
	}
	return nil
}

// DedupLowers returns lowers (top-most first) with each directory listed
// once, where it is top-most. An image may list the same layer twice
// ([A, B, A]); overlayfs refuses a lower directory given twice ("too many
// levels of symbolic links"). Keeping the top-most copy gives the same
// tree: what the lower copy adds is what the upper one adds, and its
// whiteouts and opaque directories hide only layers under it, which the
// upper copy's hide too.
func DedupLowers(lowers []string) []string {
	out := make([]string, 0, len(lowers))
	seen := make(map[string]bool, len(lowers))
	for _, l := range lowers {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

func overlayData(lowers []string, upper, work string, rootless bool) (string, error) {
	if len(lowers) == 0 {
		return "", fmt.Errorf("%w: no lower layer", ErrInvalidOverlay)
	}
	if (upper == "") != (work == "") {
		return "", fmt.Errorf("%w: upperdir and workdir go together", ErrInvalidOverlay)
	}
	var b strings.Builder
	b.WriteString("lowerdir=")
	for i, l := range lowers {
		if err := checkOverlayPath("lowerdir", l); err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(escapeOverlayPath(l))
	}
	if upper != "" {
		if err := checkOverlayPath("upperdir", upper); err != nil {
			return "", err
		}
		if err := checkOverlayPath("workdir", work); err != nil {
			return "", err
		}
		b.WriteString(",upperdir=")
		b.WriteString(escapeOverlayPath(upper))
		b.WriteString(",workdir=")
		b.WriteString(escapeOverlayPath(work))
	}
	if rootless {
		b.WriteString(",userxattr")
	}
	return b.String(), nil
}

func checkDataLen(data string, nlowers int) error {
	if max := os.Getpagesize() - 1; len(data) > max {
		return fmt.Errorf("%w: %d bytes for %d lower layers, mount(2) reads at most %d; use OverlayOptionsIn and MountIn",
			ErrOptionsTooLong, len(data), nlowers, max)
	}
	return nil
}

// OverlayOptions returns the overlay mount data for the lower directories
// lowers (top-most first) and the upper and work directories, which may
// both be empty for a read-only overlay. Paths are escaped for the
// kernel's parser (`\`, `,` and `:`). rootless adds userxattr, which an
// overlay mounted in a user namespace needs and which makes the kernel read
// the user.overlay.* xattrs written by [Unpack] with Rootless set.
//
// mount(2) reads at most one page of data: when the options are longer,
// OverlayOptions fails with [ErrOptionsTooLong] and [OverlayOptionsIn]
// should be used.
func OverlayOptions(lowers []string, upper, work string, rootless bool) (string, error) {
	data, err := overlayData(lowers, upper, work, rootless)
	if err != nil {
		return "", err
	}
	if err := checkDataLen(data, len(lowers)); err != nil {
		return "", err
	}
	return data, nil
}

// OverlayOptionsIn is [OverlayOptions] with shorter paths: the lower
// directories, which must be absolute, are given relative to their
// deepest common parent dir (the cache root for layers of a [Cache]), as are
// upper and work when they are below it. The data is valid only for a
// mount made with dir as working directory: use [MountIn].
func OverlayOptionsIn(lowers []string, upper, work string, rootless bool) (data, dir string, err error) {
	if len(lowers) == 0 {
		return "", "", fmt.Errorf("%w: no lower layer", ErrInvalidOverlay)
	}
	for _, p := range append([]string{upper, work}, lowers...) {
		if p != "" && !filepath.IsAbs(p) {
			return "", "", fmt.Errorf("%w: %q is not absolute", ErrInvalidOverlay, p)
		}
	}
	dir = filepath.Dir(filepath.Clean(lowers[0]))
	for _, l := range lowers[1:] {
		dir = commonDir(dir, filepath.Dir(filepath.Clean(l)))
	}
	rel := func(p string) string {
		if p == "" {
			return ""
		}
		r, err := filepath.Rel(dir, p)
		if err != nil || r == ".." || strings.HasPrefix(r, "../") || len(r) >= len(p) {
			return p
		}
		return r
	}
	short := make([]string, len(lowers))
	for i, l := range lowers {
		short[i] = rel(l)
	}
	data, err = overlayData(short, rel(upper), rel(work), rootless)
	if err != nil {
		return "", "", err
	}
	if err := checkDataLen(data, len(lowers)); err != nil {
		return "", "", err
	}
	return data, dir, nil
}

// commonDir returns the deepest directory containing both clean absolute
// directories a and b.
func commonDir(a, b string) string {
	for a != b {
		if len(a) > len(b) {
			a = filepath.Dir(a)
		} else {
			b = filepath.Dir(b)
		}
	}
	return a
}

// Mount mounts an overlay with mount data from [OverlayOptions] on target.
func Mount(target, data string) error {
	if err := checkDataLen(data, strings.Count(data, ":")+1); err != nil {
		return fmt.Errorf("mount overlay on %s: %w", target, err)
	}
	if err := unix.Mount("overlay", target, "overlay", 0, data); err != nil {
		return fmt.Errorf("mount overlay on %s: %w", target, err)
	}
	return nil
}

// MountIn mounts an overlay with mount data from [OverlayOptionsIn] on
// target, resolving relative paths in data (and target) from dir. Only the
// thread doing the mount changes directory (it unshares its filesystem
// attributes and is discarded afterwards): the working directory of the
// process is untouched.
func MountIn(dir, target, data string) error {
	if err := checkDataLen(data, strings.Count(data, ":")+1); err != nil {
		return fmt.Errorf("mount overlay on %s: %w", target, err)
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the goroutine's end then ends the thread, whose
		// working directory is no longer the process's.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare filesystem attributes: %w", err)
			return
		}
		if err := unix.Chdir(dir); err != nil {
			errc <- &os.PathError{Op: "chdir", Path: dir, Err: err}
			return
		}
		errc <- unix.Mount("overlay", target, "overlay", 0, data)
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("mount overlay on %s: %w", target, err)
	}
	return nil
}

// Unmount unmounts the overlay (or any mount) at target.
func Unmount(target string) error {
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}
