package main

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/internal/userns"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// What ps, inspect, images, pool ls, snapshot ls and volume ls print with
// --format json, and what their templates see: one convention for every
// command, podman's (its ListContainer, InspectContainerData,
// ImageSummary...), with bothy's own fields under names of their own
// (docs/cli.md lists them). These are output views: the records on disk
// (sandbox.Sandbox's state.json...) keep their own keys.
//
// A field is named as its JSON key (Id, not ID) so that a template says
// what jq says; methods give what podman's templates give besides
// (ps's {{.ID}} is the short ID, {{.Names}} the name as text).

// portMapping is a published port as podman's ps prints it.
type portMapping struct {
	HostIP        string `json:"host_ip"`
	ContainerPort uint16 `json:"container_port"`
	HostPort      uint16 `json:"host_port"`
	Range         uint16 `json:"range"`
	Protocol      string `json:"protocol"`
}

func portMappings(ports []network.Port) []portMapping {
	out := make([]portMapping, 0, len(ports))
	for _, p := range ports {
		out = append(out, portMapping{HostIP: p.HostIP.String(), ContainerPort: p.ContainerPort, HostPort: p.HostPort, Range: 1, Protocol: p.Proto})
	}
	return out
}

// slurmView is the Slurm job a sandbox was created in.
type slurmView struct {
	JobID       string `json:"JobID"`
	StepID      string `json:"StepID,omitempty"`
	ArrayJobID  string `json:"ArrayJobID,omitempty"`
	ArrayTaskID string `json:"ArrayTaskID,omitempty"`
}

func slurmOf(j *sandbox.SlurmJob) *slurmView {
	if j == nil {
		return nil
	}
	return &slurmView{JobID: j.JobID, StepID: j.StepID, ArrayJobID: j.ArrayJobID, ArrayTaskID: j.ArrayTaskID}
}

// viewer makes sandboxes' views: it reads whether a sandbox is paused, and
// finds each image's ID (podman's ImageID: the config digest) from the
// manifest digest a sandbox records, once per image.
type viewer struct {
	ctx context.Context
	m   *sandbox.Manager
	ids map[string]string
}

func newViewer(ctx context.Context, m *sandbox.Manager) *viewer {
	return &viewer{ctx: ctx, m: m, ids: map[string]string{}}
}

// state is the State of a sandbox as ps and inspect show it: "paused" for
// a running sandbox whose cgroup is frozen (bothy pause).
func (vw *viewer) state(sb *sandbox.Sandbox) (state string, paused bool) {
	if sb.Status == sandbox.StatusRunning {
		if p, _ := vw.m.Paused(sb); p {
			return "paused", true
		}
	}
	return string(sb.Status), false
}

// imageID is the ID of the image whose manifest digest is manifest: its
// config digest's hex, or, for an image no longer in the caller's store
// (removed, or in a shared store), the manifest digest's.
func (vw *viewer) imageID(manifest string) string {
	if id, ok := vw.ids[manifest]; ok {
		return id
	}
	id := hexOf(manifest)
	if manifest != "" {
		if img, err := vw.m.Store().Resolve(vw.ctx, manifest); err == nil {
			id = img.ID.Encoded()
		}
	}
	vw.ids[manifest] = id
	return id
}

// psView is one sandbox as ps prints it (podman's ListContainer).
type psView struct {
	AutoRemove bool              `json:"AutoRemove"`
	Command    []string          `json:"Command"`
	Created    time.Time         `json:"Created"`
	CreatedAt  string            `json:"CreatedAt"`
	Exited     bool              `json:"Exited"`
	ExitedAt   int64             `json:"ExitedAt"`
	ExitCode   int32             `json:"ExitCode"`
	Id         string            `json:"Id"` //nolint:revive // podman's key
	Image      string            `json:"Image"`
	ImageID    string            `json:"ImageID"`
	Labels     map[string]string `json:"Labels"`
	Mounts     []string          `json:"Mounts"`
	Names      []string          `json:"Names"`
	Networks   []string          `json:"Networks"`
	Pid        int               `json:"Pid"`
	Ports      []portMapping     `json:"Ports"`
	Restarts   int               `json:"Restarts"`
	StartedAt  int64             `json:"StartedAt"`
	State      string            `json:"State"`
	Status     string            `json:"Status"`
	// bothy's own.
	NetworkMode string     `json:"NetworkMode"`
	Pool        string     `json:"Pool,omitempty"`
	FromPool    string     `json:"FromPool,omitempty"`
	Snapshot    string     `json:"Snapshot,omitempty"`
	Slurm       *slurmView `json:"Slurm,omitempty"`
}

// psRow is a psView as ps's templates see it: podman's {{.ID}} (short),
// {{.Names}}, {{.Ports}}, {{.Networks}}, {{.Mounts}}, {{.Labels}},
// {{.Command}} as text, {{.RunningFor}}.
type psRow struct{ psView }

func (r psRow) ID() string { return shortID(r.Id) }

// Names is the sandbox's name ("" without one).
func (r psRow) Names() string { return strings.Join(r.psView.Names, ",") }

// Ports are the published ports as the PORTS column shows them.
func (r psRow) Ports() string {
	var s []string
	for _, p := range r.psView.Ports {
		host := p.HostIP + ":" + strconv.Itoa(int(p.HostPort))
		if ip, err := netip.ParseAddr(p.HostIP); err == nil {
			host = netip.AddrPortFrom(ip, p.HostPort).String()
		}
		s = append(s, fmt.Sprintf("%s->%d/%s", host, p.ContainerPort, p.Protocol))
	}
	return strings.Join(s, ", ")
}

func (r psRow) Networks() string { return strings.Join(r.psView.Networks, ",") }
func (r psRow) Mounts() string   { return strings.Join(r.psView.Mounts, ",") }
func (r psRow) Command() string  { return strings.Join(r.psView.Command, " ") }

// Labels are the labels as k=v, comma-separated, sorted.
func (r psRow) Labels() string { return joinLabels(r.psView.Labels) }

// RunningFor is how long ago the sandbox was created ("5m3s ago").
func (r psRow) RunningFor() string { return ago(r.Created) }

// psHeaders name the columns of a ps table template.
var psHeaders = map[string]string{"ID": "SANDBOX ID", "Id": "SANDBOX ID", "Names": "NAME", "RunningFor": "CREATED"}

func joinLabels(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + l[k]
	}
	return strings.Join(keys, ",")
}

func ago(t time.Time) string { return time.Since(t).Round(time.Second).String() + " ago" }

func shortID(id string) string { return id[:min(12, len(id))] }

// hexOf is a digest's hex ("sha256:" cut).
func hexOf(digest string) string {
	_, hex, ok := strings.Cut(digest, ":")
	if !ok {
		return digest
	}
	return hex
}

func (vw *viewer) ps(sb *sandbox.Sandbox) psView {
	state, _ := vw.state(sb)
	v := psView{
		AutoRemove: sb.AutoRemove, Command: sb.Cmd, Created: sb.Created, CreatedAt: sb.Created.Format("2006-01-02 15:04:05 -0700 MST"),
		Id: sb.ID, Image: sb.Image, ImageID: vw.imageID(sb.ImageDigest), Labels: sb.Labels, Names: []string{},
		Networks: []string{}, Mounts: []string{}, Ports: portMappings(sb.Ports()), State: state, Status: sb.StatusLine(),
		NetworkMode: sb.Network, Pool: sb.Pool, FromPool: sb.FromPool, Snapshot: sb.Snapshot, Slurm: slurmOf(sb.Slurm),
	}
	if state == "paused" {
		v.Status = state
	}
	if v.Command == nil {
		v.Command = []string{}
	}
	if sb.Name != "" {
		v.Names = []string{sb.Name}
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	if sb.Network != "" {
		v.Networks = []string{sb.Network}
		if a := sb.NetworkAttachment; a != nil && a.Network != "" {
			v.Networks = []string{a.Network}
		}
	}
	for _, mnt := range sb.Mounts {
		v.Mounts = append(v.Mounts, mnt.Target)
	}
	if sb.Status == sandbox.StatusRunning {
		v.Pid = sb.Pid
	}
	if main := sb.Main; main != nil {
		v.Restarts = main.Restarts
		if !main.StartedAt.IsZero() {
			v.StartedAt = main.StartedAt.Unix()
		}
		if !main.FinishedAt.IsZero() {
			v.ExitedAt = main.FinishedAt.Unix()
		}
	}
	if code, known := sb.ExitCode(); known {
		v.ExitCode = int32(code)
	}
	v.Exited = sb.Status == sandbox.StatusExited
	return v
}

// inspectView is one sandbox as inspect prints it (podman's
// InspectContainerData), with bothy's own fields after podman's.
type inspectView struct {
	Id              string            `json:"Id"` //nolint:revive // podman's key
	Created         time.Time         `json:"Created"`
	Path            string            `json:"Path"`
	Args            []string          `json:"Args"`
	State           inspectState      `json:"State"`
	Image           string            `json:"Image"`
	ImageDigest     string            `json:"ImageDigest"`
	ImageName       string            `json:"ImageName"`
	Name            string            `json:"Name"`
	RestartCount    int               `json:"RestartCount"`
	Mounts          []inspectMount    `json:"Mounts"`
	NetworkSettings inspectNetwork    `json:"NetworkSettings"`
	Config          inspectConfig     `json:"Config"`
	HostConfig      inspectHostConfig `json:"HostConfig"`

	// bothy's own: how to reach the executor (Socket, its key and the
	// socket file's identity: connect to nothing else), where the sandbox
	// lives, and what it was made from.
	Socket            string                `json:"Socket"`
	APIKey            string                `json:"APIKey,omitempty"`
	SocketIdentity    client.SocketIdentity `json:"SocketIdentity"`
	StateDir          string                `json:"StateDir"`
	UpperDir          string                `json:"UpperDir"`
	Rootless          bool                  `json:"Rootless"`
	IDMap             userns.Mapping        `json:"IDMap"`
	ImageStore        string                `json:"ImageStore,omitempty"`
	AddedLayers       []sandbox.AddedLayer  `json:"AddedLayers,omitempty"`
	Slurm             *slurmView            `json:"Slurm,omitempty"`
	Pool              string                `json:"Pool,omitempty"`
	FromPool          string                `json:"FromPool,omitempty"`
	Snapshot          string                `json:"Snapshot,omitempty"`
	SnapshotStack     int                   `json:"SnapshotStack,omitempty"`
	PendingSnapshot   string                `json:"PendingSnapshot,omitempty"`
	Cgroup            string                `json:"Cgroup,omitempty"`
	CgroupSystemd     bool                  `json:"CgroupSystemd,omitempty"`
	Security          sandbox.Security      `json:"Security"`
	LimitsIgnored     string                `json:"LimitsIgnored,omitempty"`
	LimitsNotEnforced string                `json:"LimitsNotEnforced,omitempty"`
	Disk              *sandbox.DiskLimit    `json:"Disk,omitempty"`
	Usage             *sandbox.Usage        `json:"Usage,omitempty"`
	RunStats          *sandbox.RunStats     `json:"RunStats,omitempty"`
	// Plugins are a running sandbox's enabled plugins (sandboxPlugins).
	Plugins []pluginView `json:"Plugins,omitempty"`
}

// ID is the sandbox's ID, as podman's {{.ID}} of inspect.
func (v inspectView) ID() string { return v.Id }

// inspectState is podman's State, with the main process's pid in the
// sandbox (MainPid) besides PID 1's on the host (Pid).
type inspectState struct {
	Status     string    `json:"Status"`
	Running    bool      `json:"Running"`
	Paused     bool      `json:"Paused"`
	Restarting bool      `json:"Restarting"`
	OOMKilled  bool      `json:"OOMKilled"`
	Dead       bool      `json:"Dead"`
	Pid        int       `json:"Pid"`
	ExitCode   int32     `json:"ExitCode"`
	Error      string    `json:"Error"`
	StartedAt  time.Time `json:"StartedAt"`
	FinishedAt time.Time `json:"FinishedAt"`
	// bothy's own: the main process (run -d of an image's command).
	MainPid     int    `json:"MainPid,omitempty"`
	MainRunning bool   `json:"MainRunning,omitempty"`
	MainSignal  string `json:"MainSignal,omitempty"`
	// Why a sandbox that ran is exited without having stopped: the host
	// rebooted, or its runtime state was wiped (docs/operator.md).
	RuntimeLost string `json:"RuntimeLost,omitempty"`
}

// inspectMount is podman's InspectMount.
type inspectMount struct {
	Type        string   `json:"Type"`
	Name        string   `json:"Name,omitempty"`
	Source      string   `json:"Source"`
	Destination string   `json:"Destination"`
	Driver      string   `json:"Driver"`
	Mode        string   `json:"Mode"`
	Options     []string `json:"Options"`
	RW          bool     `json:"RW"`
	Propagation string   `json:"Propagation"`
	// bothy's own: an overlay volume's upper directory.
	UpperDir string `json:"UpperDir,omitempty"`
}

// hostPort is podman's InspectHostPort.
type hostPort struct {
	HostIP   string `json:"HostIp"`
	HostPort string `json:"HostPort"`
}

// inspectNetwork is podman's NetworkSettings.
type inspectNetwork struct {
	Ports       map[string][]hostPort `json:"Ports"`
	IPAddress   string                `json:"IPAddress"`
	IPPrefixLen int                   `json:"IPPrefixLen"`
	Gateway     string                `json:"Gateway"`
	// bothy's own: the network mode, its driver, DNS, egress policy,
	// and what no longer works (a helper that exited).
	Mode   string         `json:"Mode"`
	Driver string         `json:"Driver,omitempty"`
	DNS    []string       `json:"DNS,omitempty"`
	Egress network.Egress `json:"Egress,omitzero"`
	Error  string         `json:"Error,omitempty"`
}

// inspectConfig is podman's Config.
type inspectConfig struct {
	Env        []string          `json:"Env"`
	WorkingDir string            `json:"WorkingDir"`
	User       string            `json:"User"`
	Labels     map[string]string `json:"Labels"`
	Cmd        []string          `json:"Cmd"`
	Image      string            `json:"Image"`
}

// inspectHostConfig is podman's HostConfig (its limits and policies).
type inspectHostConfig struct {
	AutoRemove     bool            `json:"AutoRemove"`
	NetworkMode    string          `json:"NetworkMode"`
	RestartPolicy  restartPolicy   `json:"RestartPolicy"`
	Memory         int64           `json:"Memory"`
	MemorySwap     int64           `json:"MemorySwap"`
	NanoCpus       int64           `json:"NanoCpus"`
	PidsLimit      int64           `json:"PidsLimit"`
	ReadonlyRootfs bool            `json:"ReadonlyRootfs"`
	CapAdd         []string        `json:"CapAdd"`
	CapDrop        []string        `json:"CapDrop"`
	ShmSize        int64           `json:"ShmSize"`
	Devices        []inspectDevice `json:"Devices"`
	// bothy's own: the disk limit in bytes (--disk).
	DiskLimit int64 `json:"DiskLimit,omitempty"`
}

// inspectDevice is one of podman's HostConfig.Devices (--device).
type inspectDevice struct {
	PathOnHost        string `json:"PathOnHost"`
	PathInContainer   string `json:"PathInContainer"`
	CgroupPermissions string `json:"CgroupPermissions"`
}

type restartPolicy struct {
	Name              string `json:"Name"`
	MaximumRetryCount int    `json:"MaximumRetryCount"`
}

func (vw *viewer) inspect(sb *sandbox.Sandbox) inspectView {
	state, paused := vw.state(sb)
	v := inspectView{
		Id: sb.ID, Created: sb.Created, Image: vw.imageID(sb.ImageDigest), ImageDigest: sb.ImageDigest, ImageName: sb.Image,
		Name: sb.Name, Args: []string{}, Mounts: []inspectMount{},
		State: inspectState{
			Status: state, Running: sb.Status == sandbox.StatusRunning && !paused, Paused: paused, Dead: sb.Status == sandbox.StatusDead,
			Error: sb.NetworkError, RuntimeLost: string(sb.RuntimeLost),
		},
		Config: inspectConfig{Env: sb.Env, WorkingDir: sb.Workdir, User: sb.User, Labels: sb.Labels, Cmd: sb.Cmd, Image: sb.Image},
		HostConfig: inspectHostConfig{
			AutoRemove: sb.AutoRemove, NetworkMode: sb.Network, Memory: sb.Limits.Memory, MemorySwap: sb.Limits.MemorySwap,
			NanoCpus: int64(sb.Limits.CPUs * 1e9), PidsLimit: sb.Limits.PidsLimit, ReadonlyRootfs: sb.Security.ReadOnly,
			CapAdd: sb.Security.CapAdd, CapDrop: sb.Security.CapDrop, ShmSize: sb.Security.ShmSize, DiskLimit: sb.Limits.Disk,
			RestartPolicy: restartPolicy{Name: cmp.Or(sb.Restart, "no")}, Devices: []inspectDevice{},
		},
		NetworkSettings: inspectNetwork{Ports: map[string][]hostPort{}, Mode: sb.Network},
		Socket:          sb.Socket, APIKey: sb.APIKey, SocketIdentity: sb.SocketIdentity, StateDir: sb.Dir, UpperDir: sb.UpperDir,
		Rootless: sb.Rootless, IDMap: sb.IDMap, ImageStore: sb.ImageStore, AddedLayers: sb.AddedLayers, Slurm: slurmOf(sb.Slurm),
		Pool: sb.Pool, FromPool: sb.FromPool, Snapshot: sb.Snapshot, SnapshotStack: sb.SnapshotStack, PendingSnapshot: sb.PendingSnapshot, Cgroup: sb.Cgroup,
		CgroupSystemd: sb.CgroupSystemd, Security: sb.Security, LimitsIgnored: sb.LimitsIgnored, LimitsNotEnforced: sb.LimitsNotEnforced,
		Disk: sb.Disk, Usage: sb.Usage, RunStats: sb.RunStats,
	}
	if len(sb.Cmd) > 0 {
		v.Path, v.Args = sb.Cmd[0], sb.Cmd[1:]
	}
	if v.Config.Labels == nil {
		v.Config.Labels = map[string]string{}
	}
	for _, l := range []*[]string{&v.Config.Env, &v.Config.Cmd, &v.HostConfig.CapAdd, &v.HostConfig.CapDrop} {
		if *l == nil {
			*l = []string{}
		}
	}
	for _, d := range sb.Security.Devices {
		v.HostConfig.Devices = append(v.HostConfig.Devices, inspectDevice{PathOnHost: d.Host, PathInContainer: d.Container, CgroupPermissions: d.Access})
	}
	if _, max, err := api.ParseRestart(sb.Restart); err == nil {
		v.HostConfig.RestartPolicy.MaximumRetryCount = max
		v.HostConfig.RestartPolicy.Name, _, _ = strings.Cut(v.HostConfig.RestartPolicy.Name, ":")
	}
	if sb.Status == sandbox.StatusRunning {
		v.State.Pid = sb.Pid
	}
	if sb.Usage != nil {
		v.State.OOMKilled = sb.Usage.OOMKills > 0
	}
	if main := sb.Main; main != nil {
		v.State.StartedAt, v.State.FinishedAt, v.RestartCount = main.StartedAt, main.FinishedAt, main.Restarts
		v.State.MainRunning, v.State.MainSignal = main.Running, main.Signal
		v.State.Restarting = main.Running && main.Pid == 0
		if main.Running {
			v.State.MainPid = main.Pid
		}
	}
	if v.State.StartedAt.IsZero() {
		v.State.StartedAt = sb.Created
	}
	if code, known := sb.ExitCode(); known {
		v.State.ExitCode = int32(code)
	}
	for _, mnt := range sb.Mounts {
		im := inspectMount{Type: string(mnt.Kind), Source: cmp.Or(mnt.HostPath, mnt.Source), Destination: mnt.Target, RW: !mnt.ReadOnly,
			Options: []string{}, Propagation: "rprivate", UpperDir: mnt.Upper}
		switch mnt.Kind {
		case sandbox.MountVolume:
			im.Name, im.Driver = mnt.Source, "local"
		case sandbox.MountTmpfs:
			im.Source = "tmpfs"
			for _, o := range []string{mnt.Size, mnt.Mode} {
				if o != "" {
					im.Options = append(im.Options, o)
				}
			}
		}
		if mnt.ReadOnly {
			im.Options = append(im.Options, "ro")
		}
		v.Mounts = append(v.Mounts, im)
	}
	for _, p := range sb.Ports() {
		key := strconv.Itoa(int(p.ContainerPort)) + "/" + p.Proto
		v.NetworkSettings.Ports[key] = append(v.NetworkSettings.Ports[key], hostPort{HostIP: p.HostIP.String(), HostPort: strconv.Itoa(int(p.HostPort))})
	}
	if a := sb.NetworkAttachment; a != nil {
		ns := &v.NetworkSettings
		ns.Driver, ns.Egress = string(a.Driver), a.Egress
		if a.Address.IsValid() {
			ns.IPAddress, ns.IPPrefixLen = a.Address.Addr().String(), a.Address.Bits()
		}
		if a.Gateway.IsValid() {
			ns.Gateway = a.Gateway.String()
		}
		for _, d := range a.DNS {
			ns.DNS = append(ns.DNS, d.String())
		}
	}
	return v
}

// imageView is one image as images prints it (podman's ImageSummary),
// with its layers (bothy's own) after podman's fields.
type imageView struct {
	Id          string            `json:"Id"`       //nolint:revive // podman's key
	ParentId    string            `json:"ParentId"` //nolint:revive // podman's key
	RepoTags    []string          `json:"RepoTags"`
	RepoDigests []string          `json:"RepoDigests"`
	Created     int64             `json:"Created"`
	Size        int64             `json:"Size"`
	SharedSize  int64             `json:"SharedSize"`
	VirtualSize int64             `json:"VirtualSize"`
	Labels      map[string]string `json:"Labels"`
	Dangling    bool              `json:"Dangling"`
	Names       []string          `json:"Names"`
	Digest      string            `json:"Digest"`
	Arch        string            `json:"Arch"`
	Os          string            `json:"Os"`
	// bothy's own: the layers, bottom first.
	Layers []layerView `json:"Layers"`
}

// layerView is one layer of an image.
type layerView struct {
	Digest    string `json:"Digest"`
	DiffID    string `json:"DiffID"`
	MediaType string `json:"MediaType"`
	Size      int64  `json:"Size"`
}

func newImageView(img *oci.Image) imageView {
	v := imageView{
		Id: img.ID.Encoded(), RepoTags: []string{}, RepoDigests: []string{}, Size: img.Size, VirtualSize: img.Size,
		Labels: img.Config.Config.Labels, Dangling: len(img.Names) == 0, Names: []string{}, Digest: img.Digest.String(),
		Arch: img.Config.Architecture, Os: img.Config.OS, Layers: []layerView{},
	}
	if !img.Created.IsZero() && img.Created.Unix() > 0 {
		v.Created = img.Created.Unix()
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	for _, n := range img.Names {
		v.Names = append(v.Names, n)
		v.RepoTags = append(v.RepoTags, n)
		repo, _ := splitTag(n)
		v.RepoDigests = append(v.RepoDigests, repo+"@"+img.Digest.String())
	}
	for _, l := range img.Layers {
		v.Layers = append(v.Layers, layerView{Digest: l.Digest.String(), DiffID: l.DiffID.String(), MediaType: l.MediaType, Size: l.Size})
	}
	return v
}

// imageRow is one name of an image as images' templates see it
// (podman's): {{.ID}} (short), {{.Repository}}, {{.Tag}}, {{.Size}} and
// {{.CreatedSince}} as text.
type imageRow struct {
	imageView
	Repository string
	Tag        string
}

func (r imageRow) ID() string           { return shortID(r.Id) }
func (r imageRow) Size() string         { return humanSize(r.imageView.Size) }
func (r imageRow) CreatedSince() string { return created(time.Unix(r.Created, 0)) }
func (r imageRow) CreatedAt() string    { return time.Unix(r.Created, 0).UTC().Format(time.RFC3339) }

// imageRows are an image's rows: one per name, or one <none>:<none>.
func imageRows(v imageView) []imageRow {
	if len(v.Names) == 0 {
		return []imageRow{{imageView: v, Repository: "<none>", Tag: "<none>"}}
	}
	var rows []imageRow
	for _, n := range v.Names {
		repo, tag := splitTag(n)
		rows = append(rows, imageRow{imageView: v, Repository: repo, Tag: tag})
	}
	return rows
}

var imageHeaders = map[string]string{"ID": "IMAGE ID", "Id": "IMAGE ID", "Repository": "REPOSITORY", "CreatedSince": "CREATED"}

// imageInspectView is one image as inspect prints it (podman's
// ImageData): its config as the image has it.
type imageInspectView struct {
	Id           string            `json:"Id"` //nolint:revive // podman's key
	Digest       string            `json:"Digest"`
	RepoTags     []string          `json:"RepoTags"`
	RepoDigests  []string          `json:"RepoDigests"`
	Created      *time.Time        `json:"Created,omitempty"`
	Config       any               `json:"Config"`
	Author       string            `json:"Author"`
	Architecture string            `json:"Architecture"`
	Os           string            `json:"Os"`
	Size         int64             `json:"Size"`
	VirtualSize  int64             `json:"VirtualSize"`
	RootFS       imageRootFS       `json:"RootFS"`
	Labels       map[string]string `json:"Labels"`
	History      any               `json:"History"`
	NamesHistory []string          `json:"NamesHistory"`
	// bothy's own: the layers, bottom first.
	Layers []layerView `json:"Layers"`
}

func (v imageInspectView) ID() string { return v.Id }

type imageRootFS struct {
	Type   string   `json:"Type"`
	Layers []string `json:"Layers"`
}

func newImageInspectView(img *oci.Image) imageInspectView {
	s := newImageView(img)
	v := imageInspectView{
		Id: s.Id, Digest: s.Digest, RepoTags: s.RepoTags, RepoDigests: s.RepoDigests, Config: img.Config.Config,
		Author: img.Config.Author, Architecture: s.Arch, Os: s.Os, Size: s.Size, VirtualSize: s.Size, Labels: s.Labels,
		History: img.Config.History, NamesHistory: s.Names, Layers: s.Layers,
		RootFS: imageRootFS{Type: "layers", Layers: []string{}},
	}
	if img.Config.History == nil {
		v.History = []any{}
	}
	if s.Created != 0 {
		t := img.Created
		v.Created = &t
	}
	for _, d := range img.Config.RootFS.DiffIDs {
		v.RootFS.Layers = append(v.RootFS.Layers, d.String())
	}
	return v
}

// poolView is one pool as pool ls prints it.
type poolView struct {
	Name    string            `json:"Name"`
	Image   string            `json:"Image"`
	Size    int               `json:"Size"`
	Ready   int               `json:"Ready"`
	Filling bool              `json:"Filling"`
	Created time.Time         `json:"Created"`
	Network string            `json:"Network"`
	Labels  map[string]string `json:"Labels"`
}

func newPoolView(p *sandbox.Pool) poolView {
	v := poolView{Name: p.Name, Image: cmp.Or(p.Template.Image, sandbox.DefaultImage), Size: p.Size, Ready: p.Ready, Filling: p.Filler,
		Created: p.Created, Network: p.Template.Network.Mode, Labels: p.Template.Labels}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	return v
}

// snapshotView is one snapshot as snapshot ls prints it.
type snapshotView struct {
	Id          string    `json:"Id"` //nolint:revive // podman's key
	Name        string    `json:"Name"`
	Parent      string    `json:"Parent"`
	Depth       int       `json:"Depth"`
	Stack       int       `json:"Stack"`
	Compacted   bool      `json:"Compacted"`
	Source      string    `json:"Source"`
	Image       string    `json:"Image"`
	ImageDigest string    `json:"ImageDigest"`
	Created     time.Time `json:"Created"`
	Dir         string    `json:"Dir"`
	Sandboxes   []string  `json:"Sandboxes"`
	Children    []string  `json:"Children"`
	Complete    bool      `json:"Complete"`
}

func (v snapshotView) ID() string { return shortID(v.Id) }

func newSnapshotView(s *sandbox.Snapshot) snapshotView {
	v := snapshotView{Id: s.ID, Name: s.Name, Parent: s.Parent, Depth: s.Depth, Stack: s.Stack, Compacted: s.Compacted, Source: s.Source, Image: s.Image, ImageDigest: s.ImageDigest,
		Created: s.Created, Dir: s.Dir, Sandboxes: s.Users, Children: s.Children, Complete: s.Complete}
	if v.Sandboxes == nil {
		v.Sandboxes = []string{}
	}
	if v.Children == nil {
		v.Children = []string{}
	}
	return v
}

// volumeView is one named volume as volume ls prints it (podman's
// volume ls), with the sandboxes that mount it (bothy's own).
type volumeView struct {
	Name       string            `json:"Name"`
	Driver     string            `json:"Driver"`
	Mountpoint string            `json:"Mountpoint"`
	CreatedAt  time.Time         `json:"CreatedAt"`
	Labels     map[string]string `json:"Labels"`
	Scope      string            `json:"Scope"`
	Options    map[string]string `json:"Options"`
	UsedBy     []string          `json:"UsedBy"`
	Running    bool              `json:"Running"`
}

func newVolumeView(v *sandbox.Volume) volumeView {
	out := volumeView{Name: v.Name, Driver: "local", Mountpoint: v.Mountpoint, CreatedAt: v.Created, Labels: map[string]string{},
		Scope: "local", Options: map[string]string{}, UsedBy: v.UsedBy, Running: v.Running}
	if out.UsedBy == nil {
		out.UsedBy = []string{}
	}
	return out
}
