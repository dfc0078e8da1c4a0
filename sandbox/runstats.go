package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// RunStats are what one sandbox used from its start to its end, as `bothy
// run --stats-file` writes them and `bothy inspect` shows them (run_stats)
// for a sandbox run in the foreground.
type RunStats struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Image string `json:"image"`
	// ExitCode is the command's (-1 when it has none: bothy lost it).
	ExitCode    int       `json:"exit_code"`
	Started     time.Time `json:"started"`
	Ended       time.Time `json:"ended"`
	WallSeconds float64   `json:"wall_seconds"`
	// CPUSeconds and MemoryPeak (bytes) come from UsageFrom: "cgroup",
	// the sandbox's own (every process; the whole sandbox's memory
	// high-water mark), or "rusage" where it has none (an unprivileged
	// sandbox in a Slurm job stays in the job's cgroup): the CPU time of
	// the sandbox's PID 1 and of every process reaped in it, and the
	// largest peak resident set of one of them.
	CPUSeconds float64 `json:"cpu_seconds"`
	MemoryPeak uint64  `json:"memory_peak"`
	UsageFrom  string  `json:"usage_from,omitempty"`
	// UpperBytes is the size of the regular files and symlinks the
	// sandbox left in its overlay upper directory (what it wrote to its
	// root filesystem, volumes and tmpfs aside); UpperFiles counts its
	// entries (directories, whiteouts and files).
	UpperBytes uint64 `json:"upper_bytes"`
	UpperFiles uint64 `json:"upper_files"`
	// Slurm is the job, step and array task the sandbox ran in.
	Slurm *SlurmJob `json:"slurm,omitempty"`
	// Errors say which figures could not be read, and why.
	Errors []string `json:"errors,omitempty"`
}

// reapedUsage holds the resource usage of sandbox PID 1s this process
// reaped (a waiting `bothy run` is their child subreaper), by pid and
// start time.
var reapedUsage sync.Map // pidStart → unix.Rusage

type pidStart struct {
	pid   int
	start uint64
}

// RunStats gathers sb's usage once it has stopped: from its cgroup when it
// has one of its own, else from the rusage of its PID 1, reaped by this
// process; and its upper directory's size. code is the command's exit code,
// started when its creation began.
func (m *Manager) RunStats(sb *Sandbox, started time.Time, code int) *RunStats {
	end := time.Now().UTC()
	st := &RunStats{
		ID: sb.ID, Name: sb.Name, Image: sb.Image, ExitCode: code, Slurm: sb.Slurm,
		Started: started.UTC(), Ended: end, WallSeconds: end.Sub(started).Seconds(),
	}
	if sb.Cgroup != "" {
		if cg, err := ReadStats(sb); err == nil {
			st.CPUSeconds, st.MemoryPeak, st.UsageFrom = cg.CPU.UsageSeconds, cg.Memory.Peak, "cgroup"
		} else {
			st.Errors = append(st.Errors, err.Error())
		}
	}
	if st.UsageFrom == "" {
		if v, ok := reapedUsage.Load(pidStart{sb.Pid, sb.PidStart}); ok {
			ru := v.(unix.Rusage)
			st.CPUSeconds = tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
			st.MemoryPeak = uint64(ru.Maxrss) * 1024
			st.UsageFrom = "rusage"
		} else {
			st.Errors = append(st.Errors, "cpu and memory: no cgroup of its own, and its PID 1 was not reaped by this process")
		}
	}
	var err error
	if st.UpperBytes, st.UpperFiles, err = UpperUsage(sb.UpperDir); err != nil {
		st.Errors = append(st.Errors, err.Error())
	}
	return st
}

func tvSeconds(tv unix.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

// UpperUsage sizes an overlay upper directory, which the sandbox wrote:
// every name is resolved inside it (os.Root: a symlink, or a directory
// swapped for one, never leads out), symlinks are not followed, and what
// cannot be read (a directory of another id's, mode 0700) is skipped and
// said in the error, the rest counted.
func UpperUsage(dir string) (bytes, files uint64, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("upper directory: %w", err)
	}
	defer root.Close()
	skipped := 0
	var walk func(rel string)
	walk = func(rel string) {
		f, err := root.Open(rel)
		if err != nil {
			skipped++
			return
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			skipped++
		}
		for _, name := range names {
			p := path.Join(rel, name)
			fi, err := root.Lstat(p)
			if err != nil {
				skipped++
				continue
			}
			files++
			switch {
			case fi.IsDir():
				walk(p)
			case fi.Mode().IsRegular(), fi.Mode()&fs.ModeSymlink != 0:
				bytes += uint64(fi.Size())
			}
		}
	}
	walk(".")
	if skipped > 0 {
		err = fmt.Errorf("upper directory: %d entries unreadable, not counted", skipped)
	}
	return bytes, files, err
}

// RecordRunStats stores st in the sandbox's record, where inspect shows it
// (run_stats).
func (m *Manager) RecordRunStats(ctx context.Context, st *RunStats) error {
	unlock, err := m.paths.lock(ctx, st.ID)
	if err != nil {
		return err
	}
	defer unlock()
	data, err := os.ReadFile(filepath.Join(m.paths.dir(st.ID), stateFile))
	if err != nil {
		return fmt.Errorf("record run stats of %s: %w", st.ID[:12], err)
	}
	var rec Sandbox // as stored: nothing read-time is written back
	if err := json.Unmarshal(data, &rec); err != nil {
		return fmt.Errorf("record run stats of %s: corrupt state.json: %w", st.ID[:12], err)
	}
	rec.RunStats = st
	return writeState(m.paths.dir(st.ID), &rec)
}

// StatsFile is where `bothy run --stats-file` writes a sandbox's RunStats:
// a file on the host that a sandbox may be able to reach (through a volume
// of its directory), so it is never written through: the directory is
// opened once, when the run starts, and the stats are written to a new
// temporary file in it (O_CREAT|O_EXCL|O_NOFOLLOW) renamed over the name,
// which replaces a symlink planted there rather than following it.
type StatsFile struct {
	dir  *os.File
	name string
}

// OpenStatsFile checks that name can be written, before the run: its
// directory must exist, and name must not be a directory.
func OpenStatsFile(name string) (*StatsFile, error) {
	base := filepath.Base(name)
	if name == "" || base == "." || base == ".." || base == "/" {
		return nil, fmt.Errorf("stats file %q: want a file name", name)
	}
	dir, err := os.OpenFile(filepath.Dir(name), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("stats file %s: open its directory: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		dir.Close()
		return nil, fmt.Errorf("stats file %s: is a directory", name)
	}
	return &StatsFile{dir: dir, name: base}, nil
}

// Write writes v as JSON atomically in place of the file, and closes f.
func (f *StatsFile) Write(v any) (err error) {
	defer f.dir.Close()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	dfd := int(f.dir.Fd())
	var tmp string
	var fd int
	for i := 0; ; i++ {
		tmp = fmt.Sprintf(".%s.%d.%d.tmp", f.name, os.Getpid(), i)
		fd, err = unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if !errors.Is(err, unix.EEXIST) || i == 100 {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("write stats file %s: %w", f.name, err)
	}
	out := os.NewFile(uintptr(fd), tmp)
	_, err = out.Write(data)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, f.name)
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("write stats file %s: %w", f.name, err)
	}
	return nil
}

// Close gives up on writing the file.
func (f *StatsFile) Close() error { return f.dir.Close() }

// StatsTarget is a stats file to write later, by whichever bothy removes
// the sandbox: its absolute path, and its directory's identity when it was
// given. The directory is opened again by path at removal, when a sandbox
// may have had the time to swap it (or a parent) for a symlink, if it is
// somewhere the sandbox can write: the stats are written only if the
// directory opened is the same one (device and inode), and then, as
// StatsFile writes, never through a symlink.
type StatsTarget struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// NewStatsTarget checks name as OpenStatsFile does and notes its
// directory's identity.
func NewStatsTarget(name string) (*StatsTarget, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, fmt.Errorf("stats file %s: %w", name, err)
	}
	f, err := OpenStatsFile(abs)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.dir.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stats file %s: %w", name, err)
	}
	return &StatsTarget{Path: abs, Dev: st.Dev, Ino: st.Ino}, nil
}

// Open opens the target's directory again, and refuses one that is not
// the directory it was given in.
func (t *StatsTarget) Open() (*StatsFile, error) {
	f, err := OpenStatsFile(t.Path)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.dir.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stats file %s: %w", t.Path, err)
	}
	if st.Dev != t.Dev || st.Ino != t.Ino {
		f.Close()
		return nil, fmt.Errorf("stats file %s: its directory is not the one it was in when the sandbox was created (replaced, or a symlink now): not written", t.Path)
	}
	return f, nil
}

// writeStatsFile writes, for a sandbox removed with a stats file, what it
// used from its creation to its main process's end (else to now): its
// processes are gone, its cgroup not yet. A sandbox that never ran (its
// creation failed) has none.
func (m *Manager) writeStatsFile(sb *Sandbox) error {
	if sb.StatsFile == nil || sb.Pid == 0 {
		return nil
	}
	f, err := sb.StatsFile.Open()
	if err != nil {
		return err
	}
	code, known := sb.ExitCode()
	if !known {
		code = -1
	}
	st := m.RunStats(sb, sb.Created, code)
	// It ended when its main process did, as the executor recorded (the
	// sandbox's word, as its exit code is), if that is in between.
	if main := sb.Main; main != nil && !main.Running && main.FinishedAt.After(st.Started) && main.FinishedAt.Before(st.Ended) {
		st.Ended = main.FinishedAt.UTC()
		st.WallSeconds = st.Ended.Sub(st.Started).Seconds()
	}
	return f.Write(st)
}
