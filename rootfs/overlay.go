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

// MaxStackPath is the longest path fsconfig(2) takes (it copies at most
// 256 bytes of a string value, the NUL included).
const MaxStackPath = 255

// MountStack mounts an overlay of lowers (top-most first, absolute paths)
// with upper and work (both empty for a read-only overlay) on target, with
// the new mount API: fsopen("overlay"), one fsconfig "lowerdir+" call per
// lower layer (Linux 6.8), fsmount and move_mount. There is no page limit
// on the list, as there is on mount(2)'s data ([ErrOptionsTooLong]): only
// overlay's own limit of 500 lower layers. Each path is given relative to
// the lowers' deepest common directory when that is shorter, from a thread
// that changed into it (as [MountIn]), and must then fit in
// [MaxStackPath]. userxattr is [OverlayOptions]' rootless. No path is
// escaped: fsconfig takes each one whole.
func MountStack(target string, lowers []string, upper, work string, userxattr bool) error {
	if len(lowers) == 0 {
		return fmt.Errorf("%w: no lower layer", ErrInvalidOverlay)
	}
	if (upper == "") != (work == "") {
		return fmt.Errorf("%w: upperdir and workdir go together", ErrInvalidOverlay)
	}
	// Whole and absolute first: commonDir needs absolute directories.
	for i, p := range append([]string{upper, work}, lowers...) {
		if i < 2 && p == "" {
			continue
		}
		if err := checkOverlayPath("path", p); err != nil {
			return err
		}
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%w: %q is not absolute", ErrInvalidOverlay, p)
		}
	}
	dir := filepath.Dir(filepath.Clean(lowers[0]))
	for _, l := range lowers[1:] {
		dir = commonDir(dir, filepath.Dir(filepath.Clean(l)))
	}
	type param struct{ key, value string }
	var params []param
	add := func(key, p string) error {
		if err := checkOverlayPath(key, p); err != nil {
			return err
		}
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%w: %q is not absolute", ErrInvalidOverlay, p)
		}
		if r, err := filepath.Rel(dir, p); err == nil && r != ".." && !strings.HasPrefix(r, "../") && len(r) < len(p) {
			p = r
		}
		if len(p) > MaxStackPath {
			return fmt.Errorf("%w: %s %q is longer than fsconfig's %d bytes", ErrInvalidOverlay, key, p, MaxStackPath)
		}
		params = append(params, param{key, p})
		return nil
	}
	// lowerdir+ appends below the layers given before: top-most first.
	for _, l := range lowers {
		if err := add("lowerdir+", l); err != nil {
			return err
		}
	}
	if upper != "" {
		if err := add("upperdir", upper); err != nil {
			return err
		}
		if err := add("workdir", work); err != nil {
			return err
		}
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, whose working directory is no
		// longer the process's, ends with the goroutine (see MountIn).
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				return fmt.Errorf("unshare filesystem attributes: %w", err)
			}
			if err := unix.Chdir(dir); err != nil {
				return &os.PathError{Op: "chdir", Path: dir, Err: err}
			}
			fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
			if err != nil {
				return fmt.Errorf("fsopen overlay: %w", err)
			}
			defer unix.Close(fsfd)
			for _, p := range params {
				if err := unix.FsconfigSetString(fsfd, p.key, p.value); err != nil {
					return fmt.Errorf("fsconfig %s=%s: %w", p.key, p.value, err)
				}
			}
			if userxattr {
				if err := unix.FsconfigSetFlag(fsfd, "userxattr"); err != nil {
					return fmt.Errorf("fsconfig userxattr: %w", err)
				}
			}
			if err := unix.FsconfigCreate(fsfd); err != nil {
				return fmt.Errorf("fsconfig create (%d lower layers): %w", len(lowers), err)
			}
			mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("fsmount: %w", err)
			}
			defer unix.Close(mfd)
			if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return fmt.Errorf("move_mount: %w", err)
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("mount overlay on %s: %w", target, err)
	}
	return nil
}
