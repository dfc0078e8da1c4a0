package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/names"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/network"
)

// Pools: sandboxes started before anyone asks for them, with no daemon.
//
// A pool is a directory, State/pools/NAME, holding its record (pool.json:
// its size and the CreateOptions of its sandboxes), a members directory
// with one empty file per sandbox ready to be claimed, named by its ID, and
// fill.lock. Its sandboxes are ordinary sandboxes whose record says Pool:
// NAME and whose executor runs in pool mode: it serves nothing but GET
// /alive and one claim, authenticated with a pre-claim key that only the
// host's state holds (see executor/pool.go).
//
// Claim takes a member by removing its file under the member's own lock
// (unlink is atomic: of two claimers, one succeeds, the other gets ENOENT
// and tries the next), hands the executor its key, environment and working
// directory over its socket, and rewrites its record (name, labels, key,
// FromPool). Fill, run by a short-lived detached process that the claimer
// starts (bothy pool fill), creates members until the pool has Size of
// them and exits; only one filler works on a pool at a time (fill.lock),
// so that the pool never overfills.
//
// A member's file is made only once the sandbox is ready, and removed
// before its claim: a sandbox whose record says Pool but that has no file
// is one a killed filler or claimer left behind, and PrunePools (with the
// fill lock and the sandbox's lock, so that no filler or claimer is at
// work on it) removes it.

var (
	// ErrPoolNotFound: no pool has that name.
	ErrPoolNotFound = errors.New("no such pool")
	// ErrPoolExists: a pool with that name exists.
	ErrPoolExists = errors.New("pool already exists")
)

const (
	poolFile     = "pool.json"
	membersDir   = "members"
	fillLockFile = "fill.lock"
	// removedPoolPrefix names a pool's directory while it is removed.
	removedPoolPrefix = ".rm-"
	// MaxPoolSize bounds a pool's size.
	MaxPoolSize = 1024
)

// Pool is a pool's record (pool.json).
type Pool struct {
	Name    string    `json:"name"`
	Size    int       `json:"size"`
	Created time.Time `json:"created"`
	// Template are the options each member is created with.
	Template CreateOptions `json:"template"`

	// Filled in when read, never stored: the members ready to be claimed,
	// and those being created (a filler at work).
	Ready  int  `json:"ready"`
	Filler bool `json:"filling"`
}

func (p Paths) pools() string              { return filepath.Join(p.State, "pools") }
func (p Paths) pool(name string) string    { return filepath.Join(p.pools(), name) }
func (p Paths) members(name string) string { return filepath.Join(p.pool(name), membersDir) }

// CreatePool records a pool of size sandboxes made with template; Fill
// starts them. The template takes no name and no command (a member gets
// its name at its claim, and runs nothing before).
func (m *Manager) CreatePool(ctx context.Context, name string, size int, template CreateOptions) (*Pool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := validatePoolName(name); err != nil {
		return nil, err
	}
	if size < 1 || size > MaxPoolSize {
		return nil, fmt.Errorf("pool size %d: give 1 to %d", size, MaxPoolSize)
	}
	switch {
	case template.Name != "":
		return nil, errors.New("a pool's sandboxes take no --name: each gets its name when claimed (bothy run --pool POOL --name NAME)")
	case len(template.Cmd) > 0:
		return nil, errors.New("a pool's sandboxes take no command: they run nothing before their claim; run one with bothy run --pool POOL -- CMD")
	case template.AutoRemove:
		return nil, errors.New("a pool's sandboxes take no --rm: give it at the claim")
	case template.APIKey != "":
		return nil, errors.New("a pool's sandboxes take no --api-key: give it at the claim")
	}
	for _, p := range template.Network.Publish {
		if pp, err := parseFixedHostPort(p); err == nil && pp {
			return nil, fmt.Errorf("-p %s: a pool's sandboxes cannot all have the same host port; publish port 0 (a free one each) or none", p)
		}
	}
	if err := os.MkdirAll(m.paths.pools(), 0o700); err != nil {
		return nil, fmt.Errorf("create pool %s: %w", name, err)
	}
	// Made under a temporary name, complete, then renamed into place: a
	// pool is there whole or not at all.
	tmp, err := os.MkdirTemp(m.paths.pools(), ".new-")
	if err != nil {
		return nil, fmt.Errorf("create pool %s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	rec := &Pool{Name: name, Size: size, Created: time.Now().UTC(), Template: template}
	if err := os.Mkdir(filepath.Join(tmp, membersDir), 0o700); err != nil {
		return nil, fmt.Errorf("create pool %s: %w", name, err)
	}
	if err := writeJSON(filepath.Join(tmp, poolFile), rec); err != nil {
		return nil, fmt.Errorf("create pool %s: %w", name, err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, m.paths.pool(name), unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("%w: %s", ErrPoolExists, name)
		}
		return nil, fmt.Errorf("create pool %s: %w", name, err)
	}
	return rec, nil
}

// parseFixedHostPort reports whether a -p spec names a host port of its own.
func parseFixedHostPort(spec string) (bool, error) {
	parts := strings.Split(strings.SplitN(spec, "/", 2)[0], ":")
	switch len(parts) {
	case 1:
		return false, nil
	case 2, 3:
		hp := parts[len(parts)-2]
		return hp != "" && hp != "0" && hp != "none", nil
	}
	return false, fmt.Errorf("bad port spec %q", spec)
}

func validatePoolName(name string) error {
	if !names.Valid(name) {
		return fmt.Errorf("invalid pool name %q: use 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit", name)
	}
	return nil
}

// GetPool reads a pool's record and counts its ready members.
func (m *Manager) GetPool(ctx context.Context, name string) (*Pool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := validatePoolName(name); err != nil {
		return nil, err
	}
	rec, err := m.readPool(name)
	if err != nil {
		return nil, err
	}
	ids, _ := m.readyIDs(name)
	rec.Ready = len(ids)
	rec.Filler = m.fillerAtWork(name)
	return rec, nil
}

func (m *Manager) readPool(name string) (*Pool, error) {
	data, err := os.ReadFile(filepath.Join(m.paths.pool(name), poolFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrPoolNotFound, name)
		}
		return nil, fmt.Errorf("read pool %s: %w", name, err)
	}
	var rec Pool
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("read pool %s: corrupt %s: %w", name, poolFile, err)
	}
	rec.Name = name
	return &rec, nil
}

// ListPools returns every pool, by name.
func (m *Manager) ListPools(ctx context.Context) ([]*Pool, error) {
	entries, err := os.ReadDir(m.paths.pools())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	var out []*Pool
	for _, e := range entries {
		if !e.IsDir() || validatePoolName(e.Name()) != nil {
			continue
		}
		p, err := m.GetPool(ctx, e.Name())
		if err != nil {
			if errors.Is(err, ErrPoolNotFound) {
				continue // removed meanwhile
			}
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// memberIDs lists the pool's members ready to be claimed.
func (m *Manager) memberIDs(name string) ([]string, error) {
	entries, err := os.ReadDir(m.paths.members(name))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrPoolNotFound, name)
		}
		return nil, fmt.Errorf("list pool %s: %w", name, err)
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		if validID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// readyIDs are memberIDs less those whose sandbox is gone (bothy rm -f of
// a waiting sandbox leaves its file, which pool prune removes): what pool
// ls counts and a fill tops up. A claim takes memberIDs as they are (its
// lock finds a gone one), keeping this stat off its path.
func (m *Manager) readyIDs(name string) ([]string, error) {
	ids, err := m.memberIDs(name)
	return slices.DeleteFunc(ids, func(id string) bool {
		_, err := os.Lstat(m.paths.dir(id))
		return err != nil
	}), err
}

// ClaimOptions are what a claimed sandbox is given: what its user would
// give a fresh one.
type ClaimOptions struct {
	Pool string
	Name string
	// Env is added to the pool's (KEY=VALUE; a key set there is replaced).
	Env []string
	// Workdir, when set, replaces the pool's (an absolute path, made if
	// missing).
	Workdir string
	Labels  map[string]string
	// APIKey is the claimed sandbox's key; empty: a random one.
	APIKey     string
	AutoRemove bool
	// NoColdStart makes an empty pool an error (ErrPoolEmpty) instead of
	// a cold start.
	NoColdStart bool
}

// ErrPoolEmpty: the pool had no member ready, and ClaimOptions.NoColdStart
// was set.
var ErrPoolEmpty = errors.New("pool is empty")

// Claimed says how a claim was served.
type Claimed struct {
	// Cold: no member was ready; the sandbox was created from the pool's
	// options (ColdReason says why).
	Cold       bool
	ColdReason string
	// Skipped are the members found dead or unusable on the way and
	// removed.
	Skipped int
}

// Claim takes a ready sandbox from the pool and gives it its name,
// environment, working directory, labels and key; from an empty pool it
// creates one cold from the pool's options (reported in Claimed). The
// sandbox it returns runs, is ready and belongs to the caller: it is no
// longer the pool's, and the pool is one short until Fill runs.
func (m *Manager) Claim(ctx context.Context, opts ClaimOptions) (*Sandbox, Claimed, error) {
	trace.Mark("bothy", "claim")
	var how Claimed
	if err := validatePoolName(opts.Pool); err != nil {
		return nil, how, err
	}
	if opts.Name != "" {
		if err := validateName(opts.Name); err != nil {
			return nil, how, err
		}
	}
	if opts.APIKey == "" {
		opts.APIKey = newAPIKey()
	} else if err := validateAPIKey(opts.APIKey); err != nil {
		return nil, how, err
	}
	if opts.Workdir != "" && !filepath.IsAbs(opts.Workdir) {
		return nil, how, fmt.Errorf("workdir %q: give an absolute path", opts.Workdir)
	}
	for _, kv := range opts.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, how, fmt.Errorf("environment entry %q: give KEY=VALUE", kv)
		}
	}
	// The pool's record only for a cold start: a warm claim reads the
	// members directory and the member's record.
	ids, err := m.memberIDs(opts.Pool)
	if err != nil {
		return nil, how, err
	}
	// Claimers start at random places: parallel ones rarely meet.
	if n := len(ids); n > 1 {
		off := rand.IntN(n)
		ids = append(ids[off:], ids[:off]...)
	}
	for _, id := range ids {
		sb, err := m.claimMember(ctx, opts, id)
		switch {
		case err == nil:
			trace.Mark("bothy", "claimed")
			return sb, how, nil
		case errors.Is(err, errTaken):
			continue
		case errors.Is(err, errMemberUnusable):
			how.Skipped++
			continue
		default:
			return nil, how, err
		}
	}
	how.Cold, how.ColdReason = true, fmt.Sprintf("pool %s has no sandbox ready", opts.Pool)
	if opts.NoColdStart {
		return nil, how, fmt.Errorf("%w: %s", ErrPoolEmpty, opts.Pool)
	}
	rec, err := m.readPool(opts.Pool)
	if err != nil {
		return nil, how, err
	}
	co := rec.Template
	co.Name, co.APIKey, co.AutoRemove = opts.Name, opts.APIKey, opts.AutoRemove
	co.Env = append(slices.Clone(co.Env), opts.Env...)
	if opts.Workdir != "" {
		co.Workdir = opts.Workdir
	}
	co.Labels = opts.Labels
	sb, err := m.Create(ctx, co)
	if err != nil {
		return nil, how, err
	}
	sb.FromPool = opts.Pool
	return sb, how, nil
}

var (
	// errTaken: another claimer (or a removal) has the member.
	errTaken = errors.New("pool member taken")
	// errMemberUnusable: the member was dead or refused its claim; it
	// was removed.
	errMemberUnusable = errors.New("pool member unusable")
)

// claimMember claims member id of opts.Pool: under the member's lock, its
// file is removed (only one claimer can), its executor configured and its
// record rewritten. A member that cannot be claimed is removed
// (errMemberUnusable), unless the claim's own options are at fault: then
// it goes back to the pool and the error is returned.
func (m *Manager) claimMember(ctx context.Context, opts ClaimOptions, id string) (_ *Sandbox, err error) {
	unlock, err := m.paths.tryLock(id)
	if err != nil {
		// Busy (another claimer, a removal) or gone.
		return nil, errTaken
	}
	defer unlock()
	link := filepath.Join(m.paths.members(opts.Pool), id)
	if err := os.Remove(link); err != nil {
		return nil, errTaken
	}
	putBack := func() { _ = os.WriteFile(link, nil, 0o600) }
	discard := func(why error) error {
		_ = m.cleanupLocked(context.WithoutCancel(ctx), id)
		return fmt.Errorf("%w: %s: %v", errMemberUnusable, id[:12], why)
	}
	sb, err := m.paths.readStateLocked(id)
	if err != nil {
		return nil, discard(err)
	}
	if sb.Pool != opts.Pool || sb.Status != StatusRunning {
		return nil, discard(fmt.Errorf("is %s, of pool %q", sb.Status, sb.Pool))
	}
	if opts.Name != "" {
		if err := m.paths.reserveName(opts.Name, id); err != nil {
			putBack()
			return nil, err
		}
	}
	trace.Mark("bothy", "member locked")
	claimed := *sb
	claimed.Name, claimed.APIKey, claimed.Labels, claimed.AutoRemove = opts.Name, opts.APIKey, opts.Labels, opts.AutoRemove
	claimed.Env = append(slices.Clone(sb.Env), opts.Env...)
	if opts.Workdir != "" {
		claimed.Workdir = opts.Workdir
	}
	claimed.Pool, claimed.FromPool = "", opts.Pool
	// The record kept for a start after a reboot (the claimed one) is
	// written while the executor takes the claim, off the claim's path. A
	// claim that fails removes it: with the sandbox (discard), or when the
	// member goes back to the pool; a claimer killed meanwhile leaves a
	// pool's sandbox without its member file, which prune removes with its
	// kept record (removePoolMember).
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		_ = m.paths.saveRecordVia(&claimed, claimRecordFile(id)) // a record not kept costs only a start after a reboot
	}()
	c := sb.Client()
	defer c.Close()
	err = c.Claim(ctx, api.PoolClaim{APIKey: opts.APIKey, Env: opts.Env, Workdir: opts.Workdir})
	<-kept
	if err != nil {
		m.paths.releaseName(opts.Name, id)
		giveBack := func() { // unclaimed: a member again, with no kept record
			_ = m.paths.removeKept(id)
			putBack()
		}
		if errors.Is(err, api.ErrBadRequest) {
			giveBack() // refused before anything changed
			return nil, fmt.Errorf("claim sandbox of pool %s: %w", opts.Pool, err)
		}
		if ctx.Err() != nil {
			giveBack() // the claim may not have been sent; a later claimer sees
			return nil, ctx.Err()
		}
		return nil, discard(err)
	}
	if err := network.SetForwarderKey(claimed.NetworkAttachment, opts.APIKey); err != nil {
		return nil, discard(err)
	}
	trace.Mark("bothy", "executor claimed")
	if err := writeStateVia(claimed.Dir, &claimed, claimStateFile); err != nil {
		// Claimed but not recorded: the key in the record opens nothing.
		m.paths.releaseName(opts.Name, id)
		_ = m.cleanupLocked(context.WithoutCancel(ctx), id)
		return nil, err
	}
	return &claimed, nil
}

// cleanupLocked removes sandbox id, whose lock the caller holds.
func (m *Manager) cleanupLocked(ctx context.Context, id string) error {
	sb, err := m.paths.readStateLocked(id)
	if err != nil {
		return err
	}
	return m.cleanup(ctx, id, sb)
}

// Fill creates members until the pool has its size of them ready, and
// returns; when another filler is at work on the pool, it returns at once
// (that one fills it). It is what the short-lived process a claimer starts
// runs (bothy pool fill). progress, when set, is called after each member
// is ready.
func (m *Manager) Fill(ctx context.Context, name string, progress func(ready, size int)) error {
	if err := validatePoolName(name); err != nil {
		return err
	}
	for {
		unlock, err := m.lockFill(name, false)
		if errors.Is(err, errBusy) {
			return nil
		}
		if err != nil {
			return err
		}
		full, err := m.fillLocked(ctx, name, progress)
		unlock()
		if err != nil || full {
			return err
		}
		// A claim between the last count and the unlock found the lock
		// taken and left the refill to this filler: count again.
	}
}

// lockFill takes the pool's fill lock; with wait false, errBusy when
// another process holds it.
func (m *Manager) lockFill(name string, wait bool) (unlock func(), err error) {
	fd, err := unix.Open(filepath.Join(m.paths.pool(name), fillLockFile), unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("%w: %s", ErrPoolNotFound, name)
		}
		return nil, fmt.Errorf("lock pool %s: %w", name, err)
	}
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	if err := flock(context.Background(), fd, how); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errBusy
		}
		return nil, fmt.Errorf("lock pool %s: %w", name, err)
	}
	return func() { unix.Close(fd) }, nil
}

// fillerAtWork reports whether a filler holds the pool's fill lock.
func (m *Manager) fillerAtWork(name string) bool {
	unlock, err := m.lockFill(name, false)
	if err != nil {
		return errors.Is(err, errBusy)
	}
	unlock()
	return false
}

// fillLocked is Fill with the fill lock held: it removes dead members and
// those left by killed fillers or claimers, then creates members until the
// pool is full. It reports whether the pool is full (false once the pool
// is removed, with no error).
func (m *Manager) fillLocked(ctx context.Context, name string, progress func(ready, size int)) (bool, error) {
	if _, err := m.prunePoolLocked(ctx, name); err != nil {
		return false, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		rec, err := m.readPool(name)
		if errors.Is(err, ErrPoolNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		ids, err := m.readyIDs(name)
		if errors.Is(err, ErrPoolNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if len(ids) >= rec.Size {
			return true, nil
		}
		opts := rec.Template
		opts.Pool, opts.APIKey = name, ""
		sb, err := m.Create(ctx, opts)
		if err != nil {
			return false, fmt.Errorf("fill pool %s: %w", name, err)
		}
		trace.Mark("bothy", "member made")
		// Ready: it can be claimed from now on.
		if err := os.WriteFile(filepath.Join(m.paths.members(name), sb.ID), nil, 0o600); err != nil {
			_ = m.Remove(context.WithoutCancel(ctx), sb.ID, true)
			if errors.Is(err, os.ErrNotExist) {
				return false, nil // the pool was removed meanwhile
			}
			return false, fmt.Errorf("fill pool %s: %w", name, err)
		}
		if progress != nil {
			progress(len(ids)+1, rec.Size)
		}
	}
}

// RemovePool removes a pool and the sandboxes waiting in it; sandboxes
// claimed from it are theirs and stay. A filler at work stops at its next
// step and removes what it was making.
func (m *Manager) RemovePool(ctx context.Context, name string) error {
	if err := validatePoolName(name); err != nil {
		return err
	}
	// Out of sight first, whole: no claim or filler finds it after this.
	gone, err := os.MkdirTemp(m.paths.pools(), removedPoolPrefix)
	if err != nil {
		return fmt.Errorf("remove pool %s: %w", name, err)
	}
	if err := os.Rename(m.paths.pool(name), filepath.Join(gone, name)); err != nil {
		os.Remove(gone)
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %s", ErrPoolNotFound, name)
		}
		return fmt.Errorf("remove pool %s: %w", name, err)
	}
	trace.Mark("bothy", "pool hidden")
	_, err = m.PrunePools(ctx)
	return err
}

// PrunePools removes what pools left behind: the sandboxes waiting in a
// pool that no longer exists, members that died, sandboxes a killed filler
// made but never added or a killed claimer took but never handed over, and
// the directories of removed pools. A pool whose filler is at work is left
// alone. It returns the IDs of the sandboxes removed.
func (m *Manager) PrunePools(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(m.paths.pools())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	var removed []string
	var errs []error
	live := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, removedPoolPrefix) || strings.HasPrefix(name, ".new-"):
			if err := os.RemoveAll(filepath.Join(m.paths.pools(), name)); err != nil {
				errs = append(errs, err)
			}
		case validatePoolName(name) == nil:
			live[name] = true
			unlock, err := m.lockFill(name, false)
			if err != nil {
				continue // a filler at work, or removed meanwhile
			}
			ids, err := m.prunePoolLocked(ctx, name)
			unlock()
			removed = append(removed, ids...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Sandboxes of pools that are gone.
	sbs, err := m.List(ctx)
	if err != nil {
		return removed, errors.Join(append(errs, err)...)
	}
	for _, sb := range sbs {
		if sb.Pool == "" || live[sb.Pool] {
			continue
		}
		if ok, err := m.removePoolMember(ctx, sb.ID, sb.Pool, true); err != nil {
			errs = append(errs, err)
		} else if ok {
			removed = append(removed, sb.ID)
		}
	}
	return removed, errors.Join(errs...)
}

// prunePoolLocked removes, with the pool's fill lock held, its members that
// are dead and the sandboxes of the pool that are not members (left by a
// killed filler or claimer).
func (m *Manager) prunePoolLocked(ctx context.Context, name string) ([]string, error) {
	var removed []string
	var errs []error
	sbs, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, sb := range sbs {
		if sb.Pool != name {
			continue
		}
		ok, err := m.removePoolMember(ctx, sb.ID, name, false)
		if err != nil {
			errs = append(errs, err)
		} else if ok {
			removed = append(removed, sb.ID)
		}
	}
	// Files of members whose sandbox is gone.
	entries, _ := os.ReadDir(m.paths.members(name))
	for _, e := range entries {
		if _, err := os.Lstat(m.paths.dir(e.Name())); validID(e.Name()) && errors.Is(err, os.ErrNotExist) {
			os.Remove(filepath.Join(m.paths.members(name), e.Name()))
		}
	}
	return removed, errors.Join(errs...)
}

// removePoolMember removes sandbox id of pool name, under its lock, if it
// is still the pool's and either orphaned (all: its pool is gone), not a
// ready member, or not running. A sandbox whose lock is held (its creator,
// a claimer) is left alone. It reports whether it removed it.
func (m *Manager) removePoolMember(ctx context.Context, id, name string, all bool) (bool, error) {
	unlock, err := m.paths.tryLock(id)
	if err != nil {
		return false, nil
	}
	defer unlock()
	sb, err := m.paths.readStateLocked(id)
	if err != nil || sb.Pool != name {
		return false, nil // claimed, or removed, meanwhile
	}
	link := filepath.Join(m.paths.members(name), id)
	_, lerr := os.Lstat(link)
	member := lerr == nil
	if !all && member && sb.Status == StatusRunning {
		return false, nil
	}
	if sb.Status == StatusCreating {
		return false, nil
	}
	os.Remove(link)
	if err := m.cleanup(ctx, id, sb); err != nil {
		return false, err
	}
	return true, nil
}
