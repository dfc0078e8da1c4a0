package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/executor/mainlog"
	"github.com/bothy-sandbox/bothy/internal/names"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/network"
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
	// StatusDead: what is left of a sandbox whose creation or removal was
	// cut short (its bothy killed, its launcher gone before the sandbox ran,
	// its state lost): no process of bothy's is working on it any more.
	// Processes may be left in its cgroup; rm and prune kill them.
	StatusDead Status = "dead"
)

var (
	// ErrNotFound: no sandbox has that ID, ID prefix or name.
	ErrNotFound = errors.New("no such sandbox")
	// ErrAmbiguous: an ID prefix names more than one sandbox.
	ErrAmbiguous = errors.New("sandbox ID prefix is ambiguous")
	// ErrNameInUse: another sandbox already has the name.
	ErrNameInUse = errors.New("sandbox name is already in use")
	// ErrStatsNotWritten: the sandbox was removed, but its stats file
	// (CreateOptions.StatsFile) could not be written.
	ErrStatsNotWritten = errors.New("its stats file was not written")
	// ErrRunning: the operation needs a stopped sandbox.
	ErrRunning = errors.New("sandbox is running")
)

// Sandbox is the on-disk record of one sandbox (state.json in its directory).
type Sandbox struct {
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	Image       string `json:"image"`
	ImageDigest string `json:"image_digest"`
	// ImageStore is the shared image store the image was found in ("":
	// the caller's own).
	ImageStore string `json:"image_store,omitempty"`
	// AddedLayers are the layer files given at run (--layer), on top of
	// the image's layers, bottom first.
	AddedLayers []AddedLayer `json:"added_layers,omitempty"`
	// Lowers are the diff IDs of the layers of the caller's layer cache
	// the sandbox's root filesystem is on (image prune keeps them).
	Lowers []string `json:"lowers,omitempty"`
	// Slurm is the Slurm job and step the sandbox was created in.
	Slurm      *SlurmJob         `json:"slurm,omitempty"`
	Created    time.Time         `json:"created"`
	Pid        int               `json:"pid,omitempty"`
	PidStart   uint64            `json:"pid_start,omitempty"`
	Network    string            `json:"network"`
	Rootless   bool              `json:"rootless"`
	IDMap      userns.Mapping    `json:"idmap"`
	Cmd        []string          `json:"cmd,omitempty"`
	Env        []string          `json:"env,omitempty"`
	Workdir    string            `json:"workdir,omitempty"`
	AutoRemove bool              `json:"auto_remove,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	// Cmd is the main process's command, started by the executor;
	// ExitWithMain: the sandbox ends with it; Restart is its restart
	// policy; User the sandbox's default user (for Cmd and for what runs
	// through the executor), empty for root.
	ExitWithMain bool   `json:"exit_with_main,omitempty"`
	Restart      string `json:"restart,omitempty"`
	User         string `json:"user,omitempty"`
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
	// APIKey is the key the executor requires (X-Session-API-Key) on every
	// route but /alive: random per sandbox unless given at create.
	APIKey string `json:"api_key,omitempty"`
	// SocketIdentity is the executor socket's file as bothy bound it:
	// clients connect to nothing else (see Client).
	SocketIdentity client.SocketIdentity `json:"socket_identity"`
	// NetworkAttachment is what an attached network mode (bridge, pasta,
	// slirp4netns) made for the sandbox: its address, gateway and DNS, its
	// published ports, its egress policy, and the host side (veth, rules,
	// helper) that removal detaches.
	NetworkAttachment *network.Attachment `json:"network_attachment,omitempty"`
	// Pool names the pool the sandbox waits in, unclaimed (its APIKey is
	// then the pre-claim key); FromPool the pool it was claimed from.
	Pool     string `json:"pool,omitempty"`
	FromPool string `json:"from_pool,omitempty"`
	// Snapshot is the snapshot the sandbox's root filesystem is on (its
	// layers between the image's and the upper directory), by ID;
	// PendingSnapshot one being taken of it (see TakeSnapshot).
	Snapshot        string `json:"snapshot,omitempty"`
	PendingSnapshot string `json:"pending_snapshot,omitempty"`
	// SnapshotStack is how many snapshot layers its root filesystem
	// mounted at its last start (Snapshot.Stack then).
	SnapshotStack int `json:"snapshot_stack,omitempty"`
	// RunStats are what the sandbox used, recorded by the `bothy run` that
	// ran its command in the foreground, when the sandbox stopped.
	RunStats *RunStats `json:"run_stats,omitempty"`
	// StatsFile is where its RunStats are written when it is removed
	// (CreateOptions.StatsFile).
	StatsFile *StatsTarget `json:"stats_file,omitempty"`

	// Filled in when read, never stored.
	Status Status `json:"status"`
	// Socket is the host path of the executor's API socket, in Dir.
	Socket string `json:"socket"`
	// Dir is the sandbox's runtime state directory; UpperDir its overlay
	// upper directory (what the sandbox changed in its root filesystem).
	Dir      string `json:"dir"`
	UpperDir string `json:"upper_dir"`
	// LauncherPid is the launcher that is still creating the sandbox.
	LauncherPid   int    `json:"launcher_pid,omitempty"`
	LauncherStart uint64 `json:"launcher_start,omitempty"`
	// Usage is read from the cgroup (and the disk limit) by
	// Manager.Inspect only.
	Usage *Usage `json:"usage,omitempty"`
	// Main is the main process's last known state (its status file,
	// written by the executor), when the sandbox has one.
	Main *mainlog.Status `json:"main,omitempty"`
	// NetworkError says, when Manager.Inspect finds it so, that the
	// sandbox's attached network no longer works (its helper exited): the
	// sandbox has no network.
	NetworkError string `json:"network_error,omitempty"`
	// RuntimeLost says, for a sandbox read from the record kept in the
	// data tree, that its runtime state is gone (RuntimeRebooted,
	// RuntimeWiped): it was running when the host rebooted, or when its
	// state tree was wiped. It reads as exited (dead if its PID 1 still
	// runs, unreachable); start brings it back.
	RuntimeLost string `json:"runtime_lost,omitempty"`

	// lost: there is no state.json (a creation killed before it wrote
	// one, a removal killed after it removed it, a state tree wiped), only
	// the sandbox's directories; every field but ID, Dir and Created is
	// unknown.
	lost bool
}

// StatusLine is the status as ps shows it: "exited (CODE)" for a sandbox
// whose main process's exit code is known.
func (s *Sandbox) StatusLine() string {
	if s.RuntimeLost != "" && (s.Status == StatusExited || s.Status == StatusDead) {
		return fmt.Sprintf("%s (%s)", s.Status, s.RuntimeLost)
	}
	if s.Status == StatusExited && s.Main != nil && s.Main.ExitCode != nil && !s.Main.Running {
		return fmt.Sprintf("%s (%d)", s.Status, *s.Main.ExitCode)
	}
	return string(s.Status)
}

// ExitCode is the main process's exit code once the sandbox has exited,
// and whether it is known (a sandbox without a main process has none).
func (s *Sandbox) ExitCode() (int, bool) {
	if s.Main == nil || s.RuntimeLost != "" || s.Main.ExitCode == nil || s.Main.Running {
		return 0, false
	}
	return *s.Main.ExitCode, true
}

// Ports are the sandbox's published ports, with their host ports.
func (s *Sandbox) Ports() []network.Port {
	if s.NetworkAttachment == nil {
		return nil
	}
	return s.NetworkAttachment.Ports
}

// ShortID is the first 12 hex digits of the ID, as ps shows it.
func (s *Sandbox) ShortID() string { return s.ID[:12] }

// validateName checks a sandbox's name (names.Valid).
func validateName(name string) error {
	if !names.Valid(name) {
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
	socketName = "api.sock"
	// mainDirName is the main process's directory in the upper root,
	// mounted at MainDir in the sandbox.
	mainDirName = "main"
	// newDirPrefix names a state directory while its creator prepares
	// it, before it appears under its ID.
	newDirPrefix = ".new-"
)

func (p Paths) dir(id string) string       { return filepath.Join(p.sandboxes(), id) }
func (p Paths) upperRoot(id string) string { return filepath.Join(p.uppers(), id) }

// writeState writes the record atomically.
func writeState(dir string, s *Sandbox) error { return writeStateVia(dir, s, "") }

// claimStateFile is a pool member's next state.json, made empty with the
// member (makeClaimFiles), so that its claim, which rewrites the record,
// creates no file: on a filesystem whose inode allocator skips recently
// freed inodes (ext4 without a journal, after the churn of many
// sandboxes), a file's creation took 1 to 1.5 ms of a claim's 3
// (docs/pools.md).
const claimStateFile = ".state-claim"

// writeStateVia is writeState through spare, a file of dir made earlier
// that only its caller writes (claimStateFile, under the member's lock),
// instead of a new temporary file; "", or a spare that is not there, makes
// one.
func writeStateVia(dir string, s *Sandbox, spare string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := tempFile(dir, spare, ".state-*")
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

// tempFile opens the temporary file an atomic rewrite in dir writes before
// renaming it: spare, a file of dir made earlier that only the caller
// writes, emptied, if there is one (see claimStateFile); otherwise a new
// file named after pattern (os.CreateTemp).
func tempFile(dir, spare, pattern string) (*os.File, error) {
	if spare != "" {
		if f, err := os.OpenFile(filepath.Join(dir, spare), os.O_WRONLY|os.O_TRUNC|unix.O_NOFOLLOW, 0); err == nil {
			return f, nil
		}
	}
	return os.CreateTemp(dir, pattern)
}

// readState reads a record and derives its status from the processes and,
// for a sandbox whose PID 1 was never recorded, from its lock: a creator
// still at work holds it. A state directory without state.json (its creator
// or its removal was killed) or an upper directory without a state
// directory (the state tree was lost, e.g. at a reboot) reads as a record
// with only the ID: still a sandbox, listed, that rm and prune remove.
func (p Paths) readState(id string) (*Sandbox, error) { return p.readRecord(id, true) }

// readStateLocked is readState for a caller that holds the sandbox's lock.
func (p Paths) readStateLocked(id string) (*Sandbox, error) { return p.readRecord(id, false) }

func (p Paths) readRecord(id string, probeLock bool) (*Sandbox, error) {
	dir := p.dir(id)
	s := Sandbox{ID: id, Dir: dir, Socket: p.SocketPath(id), UpperDir: filepath.Join(p.upperRoot(id), "upper")}
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("read sandbox %s: corrupt state.json: %w", id, err)
		}
		s.Dir, s.Socket, s.UpperDir = dir, p.SocketPath(id), filepath.Join(p.upperRoot(id), "upper")
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read sandbox %s: %w", id, err)
	default:
		// No record: a directory left without one, or nothing.
		st, err := os.Lstat(dir)
		if err != nil {
			if st, err = os.Lstat(p.upperRoot(id)); err != nil {
				return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
			}
			if p.fromKept(&s) {
				break // its state tree was wiped: kept in the data tree
			}
			s.Dir, s.Socket = "", ""
		}
		s.Created, s.lost = st.ModTime().UTC(), true
	}
	if len(s.Cmd) > 0 && !s.lost {
		s.Main, _ = readMainStatus(p.upperRoot(id)) // none yet, or unreadable: unknown
	}
	switch {
	case s.RuntimeLost == RuntimeRebooted:
		s.Status = StatusExited // its pid is of another boot
	case s.RuntimeLost != "" && alive(s.Pid, s.PidStart):
		// Its state tree wiped under it (not a reboot): it runs, and
		// nothing can reach it; rm, prune and start kill it.
		s.Status = StatusDead
	case s.RuntimeLost != "":
		s.Status = StatusExited
	case alive(s.Pid, s.PidStart):
		s.Status = StatusRunning
	case s.Pid != 0:
		s.Status = StatusExited
	case alive(s.LauncherPid, s.LauncherStart) || (probeLock && s.Dir != "" && p.busy(id)):
		s.Status = StatusCreating
	default:
		s.Status = StatusDead
	}
	return &s, nil
}

// errBusy: another process holds the sandbox's lock.
var errBusy = errors.New("sandbox is busy")

// lock takes the sandbox's lock, an exclusive flock on its state
// directory. Create holds it from the moment the directory appears until the
// sandbox runs (or its failure is cleaned up); stop, rm and prune hold it
// while they work. A sandbox removed while the caller waited is ErrNotFound;
// the wait ends with ctx's error when ctx is done.
func (p Paths) lock(ctx context.Context, id string) (unlock func(), err error) {
	return flockDir(ctx, p.dir(id), id, unix.LOCK_EX)
}

// tryLock is lock without the wait: errBusy when another process holds it.
func (p Paths) tryLock(id string) (unlock func(), err error) {
	return flockDir(context.Background(), p.dir(id), id, unix.LOCK_EX|unix.LOCK_NB)
}

// busy reports whether another process holds the sandbox's lock.
func (p Paths) busy(id string) bool {
	unlock, err := flockDir(context.Background(), p.dir(id), id, unix.LOCK_SH|unix.LOCK_NB)
	if err != nil {
		return errors.Is(err, errBusy)
	}
	unlock()
	return false
}

func flockDir(ctx context.Context, dir, id string, how int) (unlock func(), err error) {
	f, err := flockDirFile(ctx, dir, id, how)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// flockDirFile is flockDir, returning the open directory that holds the
// lock (closing it unlocks): a process that inherits it holds the lock too,
// while it lives.
func flockDirFile(ctx context.Context, dir, id string, how int) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil, fmt.Errorf("lock sandbox %s: %w", id, err)
	}
	if err := flock(ctx, fd, how); err != nil {
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.EWOULDBLOCK):
			return nil, errBusy
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return nil, err
		}
		return nil, fmt.Errorf("lock sandbox %s: %w", id, err)
	}
	// Removed while we waited: the lock is on a directory that is gone.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Nlink == 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// flock takes how (unix.LOCK_SH or LOCK_EX, with LOCK_NB not to wait) on
// fd, waiting until the lock is free or ctx is done. A wait given up leaves
// behind a goroutine blocked on a duplicate of fd, which lets the lock go
// as soon as it gets it: the caller closes fd, and the duplicate is then
// the last descriptor of the open file the lock belongs to.
func flock(ctx context.Context, fd, how int) error {
	try := func(fd, how int) error {
		for {
			if err := unix.Flock(fd, how); !errors.Is(err, unix.EINTR) {
				return err
			}
		}
	}
	err := try(fd, how|unix.LOCK_NB)
	if how&unix.LOCK_NB != 0 || !errors.Is(err, unix.EWOULDBLOCK) {
		return err
	}
	if ctx.Done() == nil {
		return try(fd, how) // a wait nothing can end
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	got := make(chan error, 1)
	go func() { got <- try(dup, how) }()
	select {
	case err := <-got:
		unix.Close(dup) // fd holds the lock: it is the open file's
		return err
	case <-ctx.Done():
		go func() {
			<-got
			unix.Close(dup)
		}()
		return ctx.Err()
	}
}

// makeDir creates the sandbox's state directory and returns it locked. It is
// made under a temporary name, locked, and renamed to its ID: no other
// process ever sees it unlocked while its creator lives. The creator holds
// the sandboxes directory's lock shared meanwhile, and pruneNewDirs holds it
// exclusively: a temporary directory it sees is one whose creator was killed.
func (p Paths) makeDir(ctx context.Context, id string) (unlock func(), err error) {
	unlockAll, err := flockDir(ctx, p.sandboxes(), "", unix.LOCK_SH)
	if err != nil {
		return nil, fmt.Errorf("create sandbox directory: %w", err)
	}
	defer unlockAll()
	tmp, err := os.MkdirTemp(p.sandboxes(), newDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("create sandbox directory: %w", err)
	}
	unlock, err = flockDir(ctx, tmp, id, unix.LOCK_EX)
	if err == nil {
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, p.dir(id), unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			err = os.Rename(tmp, p.dir(id)) // no RENAME_NOREPLACE here; IDs are random
		}
		if err != nil {
			unlock()
		}
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("create sandbox directory: %w", err)
	}
	return unlock, nil
}

// pruneNewDirs removes the temporary state directories of creators that
// were killed before theirs got its ID (see makeDir).
func (p Paths) pruneNewDirs(ctx context.Context) error {
	unlockAll, err := flockDir(ctx, p.sandboxes(), "", unix.LOCK_EX)
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	defer unlockAll()
	entries, err := os.ReadDir(p.sandboxes())
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), newDirPrefix) {
			if err := userns.RemoveTree(filepath.Join(p.sandboxes(), e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// lockNames serialises the removal of names (a stale one taken over, a
// released one): between reading a link and removing it, no other process
// may have replaced it.
func (p Paths) lockNames() (unlock func(), err error) {
	fd, err := unix.Open(p.names(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lock sandbox names: %w", err)
	}
	if err := flock(context.Background(), fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock sandbox names: %w", err)
	}
	return func() { unix.Close(fd) }, nil
}

// reserveName links names/NAME to id; the symlink's creation is atomic, so two
// processes can never both get the same name. A name left by a sandbox that no
// longer exists (no state directory) is taken over. The caller has made id's
// state directory first, so that a name always points at one while its
// sandbox lives.
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
		if _, serr := os.Lstat(p.dir(owner)); serr == nil || owner == id {
			return fmt.Errorf("%w: %q is used by sandbox %s; remove it or choose another name", ErrNameInUse, name, owner[:min(12, len(owner))])
		}
		// Stale: its sandbox is gone. Remove it only if it still points there.
		p.releaseName(name, owner)
	}
	return fmt.Errorf("%w: %q", ErrNameInUse, name)
}

// releaseName removes names/NAME if it still points at id.
func (p Paths) releaseName(name, id string) {
	if name == "" {
		return
	}
	unlock, err := p.lockNames()
	if err != nil {
		return
	}
	defer unlock()
	link := filepath.Join(p.names(), name)
	if owner, err := os.Readlink(link); err == nil && owner == id {
		os.Remove(link)
	}
}

// releaseNames removes every name that points at id (for a sandbox whose
// record, and so its name, is lost), or, with id empty, at a sandbox whose
// state directory is gone.
func (p Paths) releaseNames(id string) error {
	entries, err := os.ReadDir(p.names())
	if err != nil {
		return fmt.Errorf("list sandbox names: %w", err)
	}
	for _, e := range entries {
		owner, err := os.Readlink(filepath.Join(p.names(), e.Name()))
		if err != nil {
			continue
		}
		if id == "" {
			if _, err := os.Lstat(p.dir(owner)); err == nil || !errors.Is(err, os.ErrNotExist) {
				continue
			}
		} else if owner != id {
			continue
		}
		p.releaseName(e.Name(), owner)
	}
	return nil
}

func validID(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// ids lists the IDs of every sandbox: each state directory, and each upper
// directory whose state directory is gone. The upper directories are listed
// first: a creator makes the state directory before the upper one, and a
// removal removes them the other way round.
func (p Paths) ids() ([]string, error) {
	uppers, err := os.ReadDir(p.uppers())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	entries, err := os.ReadDir(p.sandboxes())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var ids []string
	seen := map[string]bool{}
	for _, e := range append(entries, uppers...) {
		if e.IsDir() && validID(e.Name()) && !seen[e.Name()] {
			seen[e.Name()] = true
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
	if names.Valid(ref) {
		if id, err := os.Readlink(filepath.Join(p.names(), ref)); err == nil && validID(id) {
			if _, err := os.Stat(p.dir(id)); err == nil {
				return id, nil
			}
		}
		if id := p.keptByName(ref); id != "" {
			return id, nil // its names were wiped with its state tree
		}
	}
	ids, err := p.ids()
	if err != nil {
		return "", err
	}
	match, ambiguous := uniquePrefix(ids, ref)
	switch {
	case ambiguous:
		return "", fmt.Errorf("%w: %s", ErrAmbiguous, ref)
	case match == "":
		return "", fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	return match, nil
}

// uniquePrefix is the one of ids that starts with ref: "" when none does,
// ambiguous when more than one does.
func uniquePrefix(ids []string, ref string) (match string, ambiguous bool) {
	for _, id := range ids {
		if strings.HasPrefix(id, ref) {
			if match != "" {
				return "", true
			}
			match = id
		}
	}
	return match, false
}
