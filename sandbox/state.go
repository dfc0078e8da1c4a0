package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/launch"
)

// Status is a sandbox's life-cycle state as seen from the host.
type Status string

const (
	// StatusCreating: a launcher is (or was, if it died) setting it up.
	StatusCreating Status = "creating"
	// StatusRunning: the executor is PID 1 and answering.
	StatusRunning Status = "running"
	// StatusExited: PID 1 is gone; the upper directory and state remain
	// until removal.
	StatusExited Status = "exited"
)

var (
	// ErrNotFound: no sandbox has that ID, ID prefix or name.
	ErrNotFound = errors.New("no such sandbox")
	// ErrAmbiguous: an ID prefix names more than one sandbox.
	ErrAmbiguous = errors.New("sandbox ID prefix is ambiguous")
	// ErrNameInUse: another sandbox already has the name.
	ErrNameInUse = errors.New("sandbox name is already in use")
	// ErrRunning: the operation needs a stopped sandbox.
	ErrRunning = errors.New("sandbox is running")
)

// Sandbox is the on-disk record of one sandbox (state.json in its directory).
type Sandbox struct {
	ID          string            `json:"id"`
	Name        string            `json:"name,omitempty"`
	Image       string            `json:"image"`
	ImageDigest string            `json:"image_digest"`
	Created     time.Time         `json:"created"`
	Pid         int               `json:"pid,omitempty"`
	PidStart    uint64            `json:"pid_start,omitempty"`
	Network     string            `json:"network"`
	Rootless    bool              `json:"rootless"`
	IDMap       launch.Mapping    `json:"idmap"`
	Cmd         []string          `json:"cmd,omitempty"`
	Env         []string          `json:"env,omitempty"`
	Workdir     string            `json:"workdir,omitempty"`
	AutoRemove  bool              `json:"auto_remove,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	// Mounts are the sandbox's volumes and tmpfs mounts.
	Mounts []Mount `json:"mounts,omitempty"`
	// Limits are the enforced resource limits; LimitsIgnored says which
	// were asked for but waived with --ignore-limits, and why;
	// LimitsNotEnforced which defaults (DefaultPidsLimit) could not be
	// applied on this host, and why.
	Limits            Limits `json:"limits,omitzero"`
	LimitsIgnored     string `json:"limits_ignored,omitempty"`
	LimitsNotEnforced string `json:"limits_not_enforced,omitempty"`
	// Disk is how Limits.Disk is enforced.
	Disk *DiskLimit `json:"disk,omitempty"`
	// Cgroup is the sandbox's cgroup path in each hierarchy ("": none of
	// its own), or a systemd scope when CgroupSystemd.
	Cgroup        string   `json:"cgroup,omitempty"`
	CgroupSystemd bool     `json:"cgroup_systemd,omitempty"`
	Security      Security `json:"security,omitzero"`

	// Filled in when read, never stored.
	Status Status `json:"status"`
	// Socket is the host path of the executor's API socket.
	Socket string `json:"socket"`
	// Dir is the sandbox's runtime state directory; UpperDir its overlay
	// upper directory (what the sandbox changed in its root filesystem).
	Dir      string `json:"dir"`
	UpperDir string `json:"upper_dir"`
	// LauncherPid is the launcher that is still creating the sandbox.
	LauncherPid   int    `json:"launcher_pid,omitempty"`
	LauncherStart uint64 `json:"launcher_start,omitempty"`
	// CreatorPid is the process that is still creating the sandbox (the one
	// that called Manager.Create): while it lives, the sandbox is
	// "creating"; rm -f does not stop it (it may be a long-lived program),
	// only the launcher.
	CreatorPid   int    `json:"creator_pid,omitempty"`
	CreatorStart uint64 `json:"creator_start,omitempty"`
	// Usage is read from the cgroup (and the disk limit) by
	// Manager.Inspect only.
	Usage *Usage `json:"usage,omitempty"`
}

// ShortID is the first 12 hex digits of the ID, as ps shows it.
func (s *Sandbox) ShortID() string { return s.ID[:12] }

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)

func validateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("invalid sandbox name %q: use 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit", name)
	}
	return nil
}

// newID returns 32 hex digits: unique enough, and short enough that the
// socket path stays under the 108-byte sun_path limit.
func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

const (
	stateFile  = "state.json"
	socketDir  = "s"
	socketName = "api.sock"
	lockFile   = "lock"
)

func (p Paths) dir(id string) string       { return filepath.Join(p.sandboxes(), id) }
func (p Paths) upperRoot(id string) string { return filepath.Join(p.uppers(), id) }

// writeState writes the record atomically.
func writeState(dir string, s *Sandbox) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".state-*")
	if err != nil {
		return fmt.Errorf("write sandbox state: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write sandbox state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write sandbox state: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, stateFile)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write sandbox state: %w", err)
	}
	return nil
}

// readState reads a record and derives its status from the processes.
func (p Paths) readState(id string) (*Sandbox, error) {
	dir := p.dir(id)
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil, fmt.Errorf("read sandbox %s: %w", id, err)
	}
	var s Sandbox
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("read sandbox %s: corrupt state.json: %w", id, err)
	}
	s.Dir = dir
	s.Socket = p.SocketPath(id)
	s.UpperDir = filepath.Join(p.upperRoot(id), "upper")
	switch {
	case alive(s.Pid, s.PidStart):
		s.Status = StatusRunning
	case s.Pid == 0 && (alive(s.LauncherPid, s.LauncherStart) || alive(s.CreatorPid, s.CreatorStart)):
		s.Status = StatusCreating
	default:
		s.Status = StatusExited
	}
	return &s, nil
}

// lock takes an exclusive flock on the sandbox's lock file; operations that
// change a sandbox (start, stop, remove) hold it.
func (p Paths) lock(id string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(p.dir(id), lockFile), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil, fmt.Errorf("lock sandbox %s: %w", id, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock sandbox %s: %w", id, err)
	}
	return func() { f.Close() }, nil
}

// reserveName links names/NAME to id; the symlink's creation is atomic, so two
// processes can never both get the same name. A name left by a sandbox that no
// longer exists is taken over.
func (p Paths) reserveName(name, id string) error {
	link := filepath.Join(p.names(), name)
	for range 3 {
		err := os.Symlink(id, link)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("reserve name %s: %w", name, err)
		}
		owner, rerr := os.Readlink(link)
		if rerr != nil {
			continue
		}
		if _, serr := os.Stat(filepath.Join(p.dir(owner), stateFile)); serr == nil || owner == id {
			return fmt.Errorf("%w: %q is used by sandbox %s; remove it or choose another name", ErrNameInUse, name, owner[:min(12, len(owner))])
		}
		// Stale: its sandbox is gone. Remove it only if it still points there.
		p.releaseName(name, owner)
	}
	return fmt.Errorf("%w: %q", ErrNameInUse, name)
}

func (p Paths) releaseName(name, id string) {
	if name == "" {
		return
	}
	link := filepath.Join(p.names(), name)
	if owner, err := os.Readlink(link); err == nil && owner == id {
		os.Remove(link)
	}
}

// ids lists the IDs of every sandbox directory.
func (p Paths) ids() ([]string, error) {
	entries, err := os.ReadDir(p.sandboxes())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && len(e.Name()) == 32 {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// resolve finds a sandbox by name, full ID or unique ID prefix.
func (p Paths) resolve(ref string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("%w: empty reference", ErrNotFound)
	}
	if nameRE.MatchString(ref) {
		if id, err := os.Readlink(filepath.Join(p.names(), ref)); err == nil {
			if _, err := os.Stat(p.dir(id)); err == nil {
				return id, nil
			}
		}
	}
	ids, err := p.ids()
	if err != nil {
		return "", err
	}
	var match string
	for _, id := range ids {
		if strings.HasPrefix(id, ref) {
			if match != "" {
				return "", fmt.Errorf("%w: %s", ErrAmbiguous, ref)
			}
			match = id
		}
	}
	if match == "" {
		return "", fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	return match, nil
}
