package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/internal/names"
	"github.com/bothy-sandbox/bothy/internal/userns"
)

var (
	// ErrVolumeNotFound: no named volume has that name.
	ErrVolumeNotFound = errors.New("no such volume")
	// ErrVolumeExists: volume create of a name that exists.
	ErrVolumeExists = errors.New("volume already exists")
	// ErrVolumeInUse: the volume is mounted by a sandbox that runs.
	ErrVolumeInUse = errors.New("volume is in use")
)

// Volume is a named volume: a directory under the data directory that
// sandboxes mount with -v volume:NAME:CTR.
type Volume struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Mountpoint is the host directory holding the volume's files.
	Mountpoint string `json:"mountpoint"`
	// UsedBy lists the IDs of sandboxes (running or not) that mount it.
	UsedBy []string `json:"used_by"`
	// Running is true when one of them runs.
	Running bool `json:"running"`
}

const (
	volumeMeta = "volume.json"
	volumeData = "_data"
	volumeLock = ".lock"
)

// Volumes is the named volumes' root.
func (p Paths) Volumes() string { return filepath.Join(p.Data, "volumes") }

func (p Paths) volumeDir(name string) string { return filepath.Join(p.Volumes(), name) }

func validateVolumeName(name string) error {
	if !names.Valid(name) {
		return fmt.Errorf("invalid volume name %q: use 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit", name)
	}
	return nil
}

// lockVolumes takes the lock of the volume root, shared (sandbox creation:
// volumes are looked up and created) or exclusive (removal: no sandbox may
// start using a volume meanwhile).
func (m *Manager) lockVolumes(ctx context.Context, exclusive bool) (unlock func(), err error) {
	if err := os.MkdirAll(m.paths.Volumes(), 0o700); err != nil {
		return nil, fmt.Errorf("create volume directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(m.paths.Volumes(), volumeLock), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock volumes: %w", err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if err := flock(ctx, int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock volumes: %w", err)
	}
	return func() { f.Close() }, nil
}

// CreateVolume creates a named volume; an existing name is refused with
// ErrVolumeExists.
func (m *Manager) CreateVolume(ctx context.Context, name string) (*Volume, error) {
	unlock, err := m.lockVolumes(ctx, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return m.createVolume(name, false)
}

// createVolume creates a volume; with exist set, an existing one is returned
// rather than refused (sandboxes create theirs on first use).
func (m *Manager) createVolume(name string, exist bool) (*Volume, error) {
	if err := validateVolumeName(name); err != nil {
		return nil, err
	}
	dir := m.paths.volumeDir(name)
	tmp, err := os.MkdirTemp(m.paths.Volumes(), ".new-")
	if err != nil {
		return nil, fmt.Errorf("create volume %s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	// The data directory's mode is the mode of the mount point inside.
	if err := os.Mkdir(filepath.Join(tmp, volumeData), 0o755); err != nil {
		return nil, fmt.Errorf("create volume %s: %w", name, err)
	}
	if err := os.Chmod(filepath.Join(tmp, volumeData), 0o755); err != nil {
		return nil, fmt.Errorf("create volume %s: %w", name, err)
	}
	v := &Volume{Name: name, Created: time.Now().UTC()}
	if err := writeJSON(filepath.Join(tmp, volumeMeta), v); err != nil {
		return nil, fmt.Errorf("create volume %s: %w", name, err)
	}
	// rename(2) of a directory onto a non-empty one (every volume holds
	// volume.json) fails: the name is taken atomically, by one creator.
	if err := os.Rename(tmp, dir); err != nil {
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			if exist {
				return m.readVolume(name)
			}
			return nil, fmt.Errorf("%w: %s", ErrVolumeExists, name)
		}
		return nil, fmt.Errorf("create volume %s: %w", name, err)
	}
	v.Mountpoint = filepath.Join(dir, volumeData)
	v.UsedBy = []string{}
	return v, nil
}

func (m *Manager) readVolume(name string) (*Volume, error) {
	if err := validateVolumeName(name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrVolumeNotFound, err)
	}
	dir := m.paths.volumeDir(name)
	data, err := os.ReadFile(filepath.Join(dir, volumeMeta))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrVolumeNotFound, name)
		}
		return nil, fmt.Errorf("read volume %s: %w", name, err)
	}
	var v Volume
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("read volume %s: corrupt %s: %w", name, volumeMeta, err)
	}
	v.Name = name
	v.Mountpoint = filepath.Join(dir, volumeData)
	v.UsedBy = []string{}
	return &v, nil
}

// usage fills in which sandboxes mount each volume.
func (m *Manager) usage(ctx context.Context, vols []*Volume) error {
	list, err := m.List(ctx)
	if err != nil {
		return err
	}
	byName := map[string]*Volume{}
	for _, v := range vols {
		byName[v.Name] = v
	}
	for _, sb := range list {
		for _, mnt := range sb.Mounts {
			if v := byName[mnt.Source]; mnt.Kind == MountVolume && v != nil && !slices.Contains(v.UsedBy, sb.ID) {
				v.UsedBy = append(v.UsedBy, sb.ID)
				v.Running = v.Running || sb.Status != StatusExited
			}
		}
	}
	return nil
}

// InspectVolume returns a named volume and the sandboxes that use it.
func (m *Manager) InspectVolume(ctx context.Context, name string) (*Volume, error) {
	v, err := m.readVolume(name)
	if err != nil {
		return nil, err
	}
	if err := m.usage(ctx, []*Volume{v}); err != nil {
		return nil, err
	}
	return v, nil
}

// ListVolumes returns every named volume, by name.
func (m *Manager) ListVolumes(ctx context.Context) ([]*Volume, error) {
	entries, err := os.ReadDir(m.paths.Volumes())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	vols := []*Volume{}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		v, err := m.readVolume(e.Name())
		if err != nil {
			continue // removed meanwhile
		}
		vols = append(vols, v)
	}
	if err := m.usage(ctx, vols); err != nil {
		return nil, err
	}
	return vols, nil
}

// RemoveVolume deletes a named volume and its files. A volume mounted by a
// running (or starting) sandbox is refused; one mounted only by stopped
// sandboxes is refused too unless force is set.
func (m *Manager) RemoveVolume(ctx context.Context, name string, force bool) error {
	unlock, err := m.lockVolumes(ctx, true)
	if err != nil {
		return err
	}
	defer unlock()
	v, err := m.InspectVolume(ctx, name)
	if err != nil {
		return err
	}
	return m.removeVolume(ctx, v, force)
}

func (m *Manager) removeVolume(ctx context.Context, v *Volume, force bool) error {
	if v.Running {
		return fmt.Errorf("%w: %s is mounted by running sandbox %s; stop it first", ErrVolumeInUse, v.Name, shortIDs(v.UsedBy))
	}
	if len(v.UsedBy) > 0 && !force {
		return fmt.Errorf("%w: %s is mounted by stopped sandbox %s; remove it first or use --force", ErrVolumeInUse, v.Name, shortIDs(v.UsedBy))
	}
	dir := m.paths.volumeDir(v.Name)
	// Move it out of the way first: the name is free at once, and a
	// failed removal leaves no half volume under the name.
	trash, err := os.MkdirTemp(m.paths.Volumes(), ".rm-")
	if err != nil {
		return fmt.Errorf("remove volume %s: %w", v.Name, err)
	}
	gone := filepath.Join(trash, v.Name)
	if err := os.Rename(dir, gone); err != nil {
		os.Remove(trash)
		return fmt.Errorf("remove volume %s: %w", v.Name, err)
	}
	// Files written by a sandbox under subordinate ids are removed from
	// inside a namespace with the same mapping.
	if err := userns.RemoveAs(ctx, m.opts.Init, m.mapping, trash); err != nil {
		return fmt.Errorf("remove volume %s: %w", v.Name, err)
	}
	return nil
}

// PruneVolumes removes every named volume no sandbox uses and returns their
// names.
func (m *Manager) PruneVolumes(ctx context.Context) ([]string, error) {
	unlock, err := m.lockVolumes(ctx, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	vols, err := m.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, v := range vols {
		if len(v.UsedBy) > 0 {
			continue
		}
		if err := m.removeVolume(ctx, v, false); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, v.Name)
	}
	return removed, errors.Join(errs...)
}

func shortIDs(ids []string) string {
	short := make([]string, len(ids))
	for i, id := range ids {
		short[i] = id[:min(12, len(id))]
	}
	return strings.Join(short, ", ")
}
