package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A sandbox's state directory (its record, create.json, the bundle,
// libcontainer's state, the executor's socket) is in the state tree, on a
// tmpfs by default (/run/bothy, $XDG_RUNTIME_DIR/bothy): a reboot wipes it,
// with every process, mount and cgroup of the sandbox, while its upper
// directory, in the data tree, survives. So that `bothy start` can bring it
// back, as podman start does after a reboot, the record and the options it
// was created with are kept in the data tree too (records/ID.json, 0600:
// it holds the API key), written when the sandbox runs and whenever its
// record changes in a way a start needs (rename, claim, snapshot). A
// sandbox with a kept record and no state directory reads as exited, its
// status saying why (RuntimeLost); Start, rm and prune first make its
// state directory again from the kept record (restoreDir), then work as
// for any stopped sandbox.

const (
	// RuntimeRebooted and RuntimeWiped are the values of
	// Sandbox.RuntimeLost: the host booted since the sandbox ran, or its
	// runtime state was wiped by other means (a logout that cleared
	// $XDG_RUNTIME_DIR, an operator).
	RuntimeRebooted = "host rebooted"
	RuntimeWiped    = "runtime state lost"
)

// keptRecord is records/ID.json.
type keptRecord struct {
	// BootID is the kernel's boot ID when the record was kept.
	BootID string          `json:"boot_id"`
	State  *Sandbox        `json:"state"`
	Create json.RawMessage `json:"create"`
}

// records holds one kept record per sandbox that ran (see keptRecord).
func (p Paths) records() string { return filepath.Join(p.Data, "records") }

func (p Paths) recordPath(id string) string { return filepath.Join(p.records(), id+".json") }

// bootID is the kernel's boot ID ("" when unreadable).
func bootID() string {
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// saveRecord writes sb's record and its create.json to the data tree
// (atomically). A sandbox waiting in a pool, or one without a create.json
// (made by an older bothy), keeps none: Start could not bring it back.
func (p Paths) saveRecord(sb *Sandbox) error { return p.saveRecordVia(sb, "") }

// claimRecordFile is the temporary file a pool member's claim writes its
// kept record through, made empty with the member (makeClaimFiles), as
// claimStateFile is. Its name is one of the temporary names a killed
// writer leaves, which removeKept and pruneKept remove with the sandbox.
func claimRecordFile(id string) string { return "." + id + ".claim.tmp" }

// saveRecordVia is saveRecord through spare, a file of the records
// directory made earlier that only its caller writes (claimRecordFile);
// "", or a spare that is not there, makes one.
func (p Paths) saveRecordVia(sb *Sandbox, spare string) error {
	if sb.Pool != "" {
		return nil
	}
	opts, err := readNoFollow(filepath.Join(p.dir(sb.ID), createFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("keep sandbox record: %w", err)
	}
	st := *sb
	st.RuntimeLost, st.Usage, st.Main, st.NetworkError = "", nil, nil, ""
	data, err := json.Marshal(keptRecord{BootID: bootID(), State: &st, Create: opts})
	if err != nil {
		return fmt.Errorf("keep sandbox record: %w", err)
	}
	if err := privateSubdir(p.records()); err != nil {
		return err
	}
	// Named after the sandbox: pruneKept removes one a killed writer left.
	tmp, err := tempFile(p.records(), spare, "."+sb.ID+".*.tmp")
	if err != nil {
		return fmt.Errorf("keep sandbox record: %w", err)
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p.recordPath(sb.ID))
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("keep sandbox record: %w", werr)
	}
	return nil
}

// makeClaimFiles makes a pool member's claimStateFile and
// claimRecordFile, empty, before it is a member: new files (O_EXCL, which
// follows no symlink), in the caller's private state and data trees.
func (p Paths) makeClaimFiles(id string) error {
	if err := privateSubdir(p.records()); err != nil {
		return err
	}
	for _, path := range []string{filepath.Join(p.dir(id), claimStateFile), filepath.Join(p.records(), claimRecordFile(id))} {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return fmt.Errorf("make the claim's files: %w", err)
		}
		f.Close()
	}
	return nil
}

// readKept reads sandbox id's kept record (os.ErrNotExist: none).
func (p Paths) readKept(id string) (*keptRecord, error) {
	data, err := readNoFollow(p.recordPath(id))
	if err != nil {
		return nil, err
	}
	var rec keptRecord
	if err := json.Unmarshal(data, &rec); err != nil || rec.State == nil || rec.State.ID != id {
		return nil, fmt.Errorf("read kept record of sandbox %s: corrupt %s", id[:12], filepath.Base(p.recordPath(id)))
	}
	return &rec, nil
}

// removeKept removes sandbox id's kept record, if any, and the temporary
// files of its record a killed writer left (.ID.*.tmp).
func (p Paths) removeKept(id string) error {
	if err := os.Remove(p.recordPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove kept record: %w", err)
	}
	if validID(id) {
		tmps, _ := filepath.Glob(filepath.Join(p.records(), "."+id+".*.tmp"))
		for _, t := range tmps {
			if err := os.Remove(t); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove temporary record: %w", err)
			}
		}
	}
	return nil
}

// readNoFollow reads a regular file of bothy's own, never through a
// symlink at its last component.
func readNoFollow(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	return io.ReadAll(f)
}

// fromKept fills s, a sandbox without a state directory, from its kept
// record: it reads as exited, RuntimeLost saying why. It reports whether
// there was one.
func (p Paths) fromKept(s *Sandbox) bool {
	rec, err := p.readKept(s.ID)
	if err != nil {
		return false
	}
	*s = *rec.State
	s.Dir, s.Socket, s.UpperDir = "", "", filepath.Join(p.upperRoot(s.ID), "upper")
	s.LauncherPid, s.LauncherStart = 0, 0
	s.RuntimeLost = RuntimeWiped
	if b := bootID(); b != "" && rec.BootID != "" && b != rec.BootID {
		s.RuntimeLost = RuntimeRebooted
	}
	return true
}

// restoreDir makes sandbox id's state directory again from its kept record
// when the directory is gone and the upper directory is there (the state
// tree was wiped: a reboot): state.json (reading as exited, with
// RuntimeLost) and create.json, made under a temporary name and renamed
// into place, as makeDir does, and its name reserved again if no other
// sandbox took it meanwhile. It reports whether the state directory is
// there now (false: no kept record).
func (p Paths) restoreDir(ctx context.Context, id string) (bool, error) {
	if _, err := os.Lstat(p.dir(id)); err == nil {
		return true, nil
	}
	if _, err := os.Lstat(p.upperRoot(id)); err != nil {
		return false, nil
	}
	var s Sandbox
	s.ID = id
	if !p.fromKept(&s) {
		return false, nil
	}
	rec, err := p.readKept(id)
	if err != nil {
		return false, err
	}
	if s.Name != "" {
		if owner, err := os.Readlink(filepath.Join(p.names(), s.Name)); err == nil && owner != id {
			if _, err := os.Lstat(p.dir(owner)); err == nil {
				s.Name = "" // taken by another sandbox since
			}
		}
	}
	unlockAll, err := flockDir(ctx, p.sandboxes(), "", unix.LOCK_SH)
	if err != nil {
		return false, fmt.Errorf("restore sandbox %s: %w", id[:12], err)
	}
	defer unlockAll()
	tmp, err := os.MkdirTemp(p.sandboxes(), newDirPrefix)
	if err != nil {
		return false, fmt.Errorf("restore sandbox %s: %w", id[:12], err)
	}
	opts := rec.Create
	if opts == nil {
		opts = json.RawMessage("null")
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, opts, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(opts)
	}
	err = os.WriteFile(filepath.Join(tmp, createFile), pretty.Bytes(), 0o600)
	if err == nil {
		err = writeState(tmp, &s)
	}
	if err == nil {
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, p.dir(id), unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			os.RemoveAll(tmp) // restored by another bothy meanwhile
			return true, nil
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return false, fmt.Errorf("restore sandbox %s: %w", id[:12], err)
	}
	if s.Name != "" {
		if owner, err := os.Readlink(filepath.Join(p.names(), s.Name)); err != nil || owner != id {
			_ = p.reserveName(s.Name, id) // taken at this instant: it goes without
		}
	}
	return true, nil
}

// keptByName is the sandbox without a state directory whose kept record
// has name ("": none).
func (p Paths) keptByName(name string) string {
	entries, err := os.ReadDir(p.records())
	if err != nil {
		return ""
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !validID(id) {
			continue
		}
		if _, err := os.Lstat(p.dir(id)); err == nil {
			continue
		}
		if rec, err := p.readKept(id); err == nil && rec.State.Name == name {
			return id
		}
	}
	return ""
}

// pruneKept removes the kept records of sandboxes that are gone (neither a
// state nor an upper directory: a removal killed between its steps), and
// the temporary files of their records that a killed writer left.
func (p Paths) pruneKept() error {
	entries, err := os.ReadDir(p.records())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list kept records: %w", err)
	}
	var errs []error
	gone := func(id string) bool {
		_, serr := os.Lstat(p.dir(id))
		_, uerr := os.Lstat(p.upperRoot(id))
		return errors.Is(serr, os.ErrNotExist) && errors.Is(uerr, os.ErrNotExist)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		id, ok := keptRecordID(e.Name())
		if !ok || seen[id] || !validID(id) {
			continue
		}
		seen[id] = true
		if gone(id) {
			errs = append(errs, p.removeKept(id)) // the record and its temporary files
		}
	}
	return errors.Join(errs...)
}

// keptRecordID is the sandbox a file of records/ belongs to: its record,
// ID.json, or a temporary one a killed writer left, .ID.RANDOM.tmp (its
// sandbox gone, its writer is too).
func keptRecordID(name string) (string, bool) {
	if id, ok := strings.CutSuffix(name, ".json"); ok {
		return id, true
	}
	if rest, ok := strings.CutPrefix(name, "."); ok && strings.HasSuffix(rest, ".tmp") {
		id, _, ok := strings.Cut(rest, ".")
		return id, ok
	}
	return "", false
}

// saveRecord keeps sb's record (see Paths.saveRecord).
func (m *Manager) saveRecord(sb *Sandbox) error { return m.paths.saveRecord(sb) }
