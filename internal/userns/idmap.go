package userns

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/moby/sys/capability"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/bothy-sandbox/bothy/internal/ipc"
)

// Mapping modes.
const (
	// MapHost: no user namespace around the sandbox; real ids (root).
	MapHost = "host"
	// MapSingle: the caller mapped to root and nothing else. Needs no helper;
	// every file of the image is owned by root inside.
	MapSingle = "single"
	// MapSubID: the caller mapped to root and the caller's subordinate
	// range (/etc/subuid, /etc/subgid) to ids 1…n, written by the setuid
	// newuidmap and newgidmap. Files keep the owners the image gives them.
	MapSubID = "subid"
)

// Mapping is how a sandbox's user namespace maps ids onto the host.
type Mapping struct {
	Mode string                 `json:"mode"`
	UIDs []specs.LinuxIDMapping `json:"uids,omitempty"`
	GIDs []specs.LinuxIDMapping `json:"gids,omitempty"`
}

// Size is the number of container ids mapped.
func (m Mapping) Size() uint32 {
	var n uint32
	for _, r := range m.UIDs {
		n = max(n, r.ContainerID+r.Size)
	}
	return n
}

// ChooseMapping picks the mapping for the calling user. want is "" (best
// available), MapSingle or MapSubID (an error if it cannot be had).
func ChooseMapping(want string) (Mapping, error) {
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		return Mapping{Mode: MapHost}, nil
	}
	single := Mapping{
		Mode: MapSingle,
		UIDs: []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(uid), Size: 1}},
		GIDs: []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(gid), Size: 1}},
	}
	switch want {
	case MapSingle:
		return single, nil
	case "", MapSubID:
	default:
		return Mapping{}, fmt.Errorf("unknown user namespace mode %q: use %q or %q", want, MapSingle, MapSubID)
	}
	subUID, errU := subIDRange("/etc/subuid", uid)
	subGID, errG := subIDRange("/etc/subgid", uid)
	_, errNU := exec.LookPath("newuidmap")
	_, errNG := exec.LookPath("newgidmap")
	if err := errors.Join(errU, errG, errNU, errNG); err != nil {
		if want == MapSubID {
			return Mapping{}, fmt.Errorf("subordinate id mapping unavailable (install uidmap and add ranges with usermod --add-subuids/--add-subgids): %w", err)
		}
		return single, nil
	}
	// Container ids 1…n come from the range, whatever its length.
	size := min(subUID.Size, subGID.Size)
	return Mapping{
		Mode: MapSubID,
		UIDs: []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(uid), Size: 1}, {ContainerID: 1, HostID: subUID.HostID, Size: size}},
		GIDs: []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(gid), Size: 1}, {ContainerID: 1, HostID: subGID.HostID, Size: size}},
	}, nil
}

// subIDRange finds the first range for uid (by name or number) in an
// /etc/subuid-format file.
func subIDRange(path string, uid int) (specs.LinuxIDMapping, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return specs.LinuxIDMapping{}, err
	}
	names := map[string]bool{strconv.Itoa(uid): true}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		names[u.Username] = true
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		f := strings.Split(strings.TrimSpace(s.Text()), ":")
		if len(f) != 3 || !names[f[0]] {
			continue
		}
		start, err1 := strconv.ParseUint(f[1], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil || count == 0 {
			continue
		}
		return specs.LinuxIDMapping{HostID: uint32(start), Size: uint32(count)}, nil
	}
	return specs.LinuxIDMapping{}, fmt.Errorf("no range for uid %d in %s", uid, path)
}

// syncEnv tells a re-executed child the descriptor on which it waits for
// ipc.IDMapped: its user namespace is mapped.
const syncEnv = "_BOTHY_IDMAP_SYNC"

// Start starts cmd in new mount and (unless mode host) user namespaces
// mapped as m. The started binary must call WaitMapped first thing (the
// launcher and the helpers do). Subordinate-id maps are written in the
// background by setuid helpers while the caller goes on: mapped waits for
// them (cmd runs on only once they are written) and says whether they were;
// on failure cmd has been killed and still needs a Wait.
func Start(cmd *exec.Cmd, m Mapping) (mapped func() error, err error) {
	done := func() error { return nil }
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	attr := cmd.SysProcAttr
	attr.Cloneflags |= syscall.CLONE_NEWNS
	switch m.Mode {
	case MapHost:
		return done, cmd.Start()
	case MapSingle:
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = toSys(m.UIDs)
		attr.GidMappings = toSys(m.GIDs)
		attr.GidMappingsEnableSetgroups = false
		return done, cmd.Start()
	case MapSubID:
		return startSubID(cmd, m)
	}
	return nil, fmt.Errorf("unknown mapping mode %q", m.Mode)
}

func toSys(in []specs.LinuxIDMapping) []syscall.SysProcIDMap {
	out := make([]syscall.SysProcIDMap, len(in))
	for i, r := range in {
		out[i] = syscall.SysProcIDMap{ContainerID: int(r.ContainerID), HostID: int(r.HostID), Size: int(r.Size)}
	}
	return out
}

// startSubID starts the child in an unmapped user namespace and has the
// setuid helpers write its maps in the background; the child waits for them
// before it runs on. The returned func waits for the helpers.
func startSubID(cmd *exec.Cmd, m Mapping) (func() error, error) {
	caps, err := allCaps()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
	cmd.SysProcAttr.AmbientCaps = caps
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer syncR.Close()
	cmd.ExtraFiles = append(cmd.ExtraFiles, syncR)
	cmd.Env = append(cmd.Environ(), syncEnv+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
	if err := cmd.Start(); err != nil {
		syncW.Close()
		return nil, err
	}
	// The two helpers are independent: run them at once.
	pid := strconv.Itoa(cmd.Process.Pid)
	errs := make(chan error, 2)
	for _, h := range []struct {
		tool string
		ids  []specs.LinuxIDMapping
	}{{"newuidmap", m.UIDs}, {"newgidmap", m.GIDs}} {
		go func() {
			args := []string{pid}
			for _, r := range h.ids {
				args = append(args, strconv.Itoa(int(r.ContainerID)), strconv.Itoa(int(r.HostID)), strconv.Itoa(int(r.Size)))
			}
			if out, err := exec.Command(h.tool, args...).CombinedOutput(); err != nil {
				errs <- fmt.Errorf("%s %s: %v: %s", h.tool, strings.Join(args, " "), err, bytes.TrimSpace(out))
				return
			}
			errs <- nil
		}()
	}
	result := make(chan error, 1)
	go func() {
		err := errors.Join(<-errs, <-errs)
		if err == nil {
			err = ipc.Send(syncW, ipc.IDMapped{})
		}
		syncW.Close()
		if err != nil {
			_ = cmd.Process.Kill()
		}
		result <- err
	}()
	return sync.OnceValue(func() error { return <-result }), nil
}

// WaitMapped blocks a child started by Start until its parent has written
// its id maps (see startSubID): it is then root in its user namespace, with
// the capabilities it was started with (ambient ones, see allCaps).
func WaitMapped() error {
	fdStr := os.Getenv(syncEnv)
	if fdStr == "" {
		return nil
	}
	fd, err := strconv.Atoi(fdStr)
	if err != nil {
		return fmt.Errorf("bad %s: %w", syncEnv, err)
	}
	f := os.NewFile(uintptr(fd), "idmap-sync")
	_, err = ipc.Receive(f, &ipc.IDMapped{})
	f.Close()
	if err != nil {
		return fmt.Errorf("parent did not map the user namespace: %w", err)
	}
	os.Unsetenv(syncEnv)
	return nil
}

// allCaps lists every capability this kernel has (0 to cap_last_cap), raised
// as ambient ones in a child of startSubID before its execve: it runs that
// execve before its maps exist, as a user that is not root in its namespace,
// and an execve gives such a user no capabilities but its ambient ones (so
// it once had to execute itself again once mapped, which cost a second start
// of the binary). They are its namespace's, which it holds in full from its
// clone; once mapped it is root there, as it would be after a second execve.
// What it starts as root gets the full set anyway, and libcontainer sets a
// sandbox's own sets, ambient included, from its spec.
var allCaps = sync.OnceValues(func() ([]uintptr, error) {
	last, err := capability.LastCap()
	if err != nil {
		return nil, fmt.Errorf("the kernel's last capability: %w", err)
	}
	caps := make([]uintptr, last+1)
	for i := range caps {
		caps[i] = uintptr(i)
	}
	return caps, nil
})
