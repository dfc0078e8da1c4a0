package sandbox

import (
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"
	"testing"
)

func TestParseVolume(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want Mount
	}{
		{"/host/a:/work", Mount{Kind: MountBind, Source: "/host/a", Target: "/work"}},
		{"/host/a:/work:rw", Mount{Kind: MountBind, Source: "/host/a", Target: "/work"}},
		{"/host/a:/work/:ro", Mount{Kind: MountBind, Source: "/host/a", Target: "/work", ReadOnly: true}},
		{"rel/dir:/x//y", Mount{Kind: MountBind, Source: "rel/dir", Target: "/x/y"}},
		{"/h:/x:overlay", Mount{Kind: MountOverlay, Source: "/h", Target: "/x"}},
		{"/h:/x:ro,overlay", Mount{Kind: MountOverlay, Source: "/h", Target: "/x", ReadOnly: true}},
		{"/h:/x:overlay+ro", Mount{Kind: MountOverlay, Source: "/h", Target: "/x", ReadOnly: true}},
		{"/h:/x:O", Mount{Kind: MountOverlay, Source: "/h", Target: "/x"}},
		{"volume:cache:/root/.cache", Mount{Kind: MountVolume, Source: "cache", Target: "/root/.cache"}},
		{"volume:data.1:/data:ro", Mount{Kind: MountVolume, Source: "data.1", Target: "/data", ReadOnly: true}},
		{"/etc/resolv.conf:/etc/resolv.conf:ro", Mount{Kind: MountBind, Source: "/etc/resolv.conf", Target: "/etc/resolv.conf", ReadOnly: true}},
		{"/d:/etc/ssl", Mount{Kind: MountBind, Source: "/d", Target: "/etc/ssl"}},
		{"/d:/devices", Mount{Kind: MountBind, Source: "/d", Target: "/devices"}},
	} {
		got, err := ParseVolume(tc.spec)
		if err != nil {
			t.Errorf("ParseVolume(%q): %v", tc.spec, err)
			continue
		}
		tc.want.Spec = tc.spec
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseVolume(%q) = %+v, want %+v", tc.spec, got, tc.want)
		}
	}
}

func TestParseVolumeRefused(t *testing.T) {
	for _, tc := range []struct{ spec, why string }{
		{"", "want HOST_PATH"},
		{"/a", "want HOST_PATH"},
		{"/a:/b:ro:x", "want HOST_PATH"},
		{":/b", "empty source"},
		{"/a:", "empty container path"},
		{"/a:b", "not absolute"},
		{"/a:/b:", "empty mode"},
		{"/a:/b:rx", `unknown mode "rx"`},
		{"/a:/b:ro,rw", "both ro and rw"},
		{"/a:/", "root directory"},
		{"/a:/..", "contains .."},
		{"/a:/x/../proc", "contains .."},
		{"/a:/proc", "reserved"},
		{"/a:/proc/sys", "reserved"},
		{"/a:/dev", "reserved"},
		{"/a:/dev/shm", "reserved"},
		{"/a:/sys/fs/cgroup", "reserved"},
		{"/a:/.bothy", "reserved"},
		{"/a:/.bothy/run:ro", "reserved"},
		{"/a:/.bothy/bin/bothy-executor", "reserved"},
		{"/a:/etc", "would hide /etc/hosts"},
		{"volume:../x:/a", "invalid volume name"},
		{"volume:a/b:/a", "invalid volume name"},
		{"volume::/a", "empty source"},
		{"volume:x:/a:overlay", "not named volumes"},
		{"volume:x", "volume:NAME"},
		{"/a\x00:/b", "NUL"},
	} {
		_, err := ParseVolume(tc.spec)
		if err == nil {
			t.Errorf("ParseVolume(%q) succeeded, want %q", tc.spec, tc.why)
			continue
		}
		if !errors.Is(err, ErrInvalidVolume) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "\""+tc.spec+"\"") && !strings.Contains(err.Error(), "NUL") {
			t.Errorf("ParseVolume(%q) = %v, want ErrInvalidVolume naming the spec and %q", tc.spec, err, tc.why)
		}
	}
}

func TestParseTmpfs(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want Mount
	}{
		{"/tmp", Mount{Kind: MountTmpfs, Target: "/tmp"}},
		{"/run:size=64m", Mount{Kind: MountTmpfs, Target: "/run", Size: "64m"}},
		{"/x:size=10%,mode=0700,ro", Mount{Kind: MountTmpfs, Target: "/x", Size: "10%", Mode: "700", ReadOnly: true}},
		{"/x:mode=1777", Mount{Kind: MountTmpfs, Target: "/x", Mode: "1777"}},
	} {
		got, err := ParseTmpfs(tc.spec)
		if err != nil {
			t.Errorf("ParseTmpfs(%q): %v", tc.spec, err)
			continue
		}
		tc.want.Spec = tc.spec
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseTmpfs(%q) = %+v, want %+v", tc.spec, got, tc.want)
		}
	}
	for _, spec := range []string{"", "tmp", "/tmp:", "/tmp:size=", "/tmp:size=1q", "/tmp:size=-1", "/tmp:size=0",
		"/tmp:mode=9", "/tmp:mode=17777", "/tmp:exec", "/dev/shm", "/proc:size=1m", "/.bothy/x", "/"} {
		if _, err := ParseTmpfs(spec); !errors.Is(err, ErrInvalidVolume) || !strings.Contains(err.Error(), "\""+spec+"\"") {
			t.Errorf("ParseTmpfs(%q) = %v, want ErrInvalidVolume naming it", spec, err)
		}
	}
}

func TestParseVolumeList(t *testing.T) {
	// OpenHands' SandboxConfig.volumes / SANDBOX_VOLUMES.
	got, err := ParseVolumeList("/host/a:/work:rw, /host/b:/data:ro,/host/c:/x:overlay,,/host/d:/y:ro,overlay,/host/e:/z,overlay,volume:v:/v:ro")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind   MountKind
		source string
		target string
		ro     bool
	}{
		{MountBind, "/host/a", "/work", false},
		{MountBind, "/host/b", "/data", true},
		{MountOverlay, "/host/c", "/x", false},
		{MountOverlay, "/host/d", "/y", true},
		{MountOverlay, "/host/e", "/z", false},
		{MountVolume, "v", "/v", true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d mounts: %+v", len(got), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Kind != w.kind || g.Source != w.source || g.Target != w.target || g.ReadOnly != w.ro {
			t.Errorf("mount %d = %+v, want %+v", i, g, w)
		}
	}
	if _, err := ParseVolumeList("/a:/b,/c:/proc"); err == nil || !strings.Contains(err.Error(), `"/c:/proc"`) {
		t.Errorf("list with a reserved target: %v", err)
	}
	if l, err := ParseVolumeList(" , "); err != nil || len(l) != 0 {
		t.Errorf("blank list: %v %v", l, err)
	}
}

func TestCheckMountsDuplicate(t *testing.T) {
	a, _ := ParseVolume("/a:/x")
	b, _ := ParseTmpfs("/x/")
	if err := checkMounts([]Mount{a, b}); err == nil || !strings.Contains(err.Error(), `"/x/"`) {
		t.Errorf("two mounts on /x: %v", err)
	}
}

// checkParsed asserts what every accepted spec must satisfy.
func checkParsed(t *testing.T, spec string, m Mount) {
	if m.Spec != spec {
		t.Fatalf("%q: Spec = %q", spec, m.Spec)
	}
	if !path.IsAbs(m.Target) || path.Clean(m.Target) != m.Target || m.Target == "/" {
		t.Fatalf("%q: target %q is not a clean absolute path below /", spec, m.Target)
	}
	for _, r := range reservedTargets {
		if m.Target == r || strings.HasPrefix(m.Target, r+"/") {
			t.Fatalf("%q: reserved target %q accepted", spec, m.Target)
		}
	}
	if strings.ContainsRune(m.Target, 0) || strings.ContainsRune(m.Source, 0) {
		t.Fatalf("%q: NUL accepted", spec)
	}
	if m.Kind == MountVolume && validateVolumeName(m.Source) != nil {
		t.Fatalf("%q: volume name %q accepted", spec, m.Source)
	}
}

func FuzzParseVolume(f *testing.F) {
	for _, s := range []string{"/a:/b", "/a:/b:ro", "/a:/b:ro,overlay", "volume:x:/y:ro", "/a:/proc", "/a:/x/../proc",
		"a:/b:overlay+rw", "/a:/.bothy/run", ":", "::::", "/a:/b:rw,ro"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		m, err := ParseVolume(spec)
		if err != nil {
			if !errors.Is(err, ErrInvalidVolume) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidVolume", spec, err)
			}
			return
		}
		checkParsed(t, spec, m)
		if m.Source == "" {
			t.Fatalf("%q: empty source accepted", spec)
		}
	})
}

func FuzzParseTmpfs(f *testing.F) {
	for _, s := range []string{"/tmp", "/tmp:size=1m,mode=1777", "/x:ro", "/dev/shm"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		m, err := ParseTmpfs(spec)
		if err != nil {
			if !errors.Is(err, ErrInvalidVolume) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidVolume", spec, err)
			}
			return
		}
		checkParsed(t, spec, m)
		// Options go into mount(2) data: no separator may sneak in.
		if strings.ContainsAny(m.Size+m.Mode, ",=") {
			t.Fatalf("%q: size %q mode %q", spec, m.Size, m.Mode)
		}
	})
}

func FuzzParseVolumeList(f *testing.F) {
	f.Add("/host/a:/work:rw,/host/b:/data:ro,/host/c:/x:overlay")
	f.Add("/a:/b:ro,overlay,volume:v:/v")
	f.Fuzz(func(t *testing.T, list string) {
		specs, err := SplitVolumes(list)
		if err != nil {
			return
		}
		for _, s := range specs {
			if m, err := ParseVolume(s); err == nil {
				checkParsed(t, s, m)
			}
		}
	})
}

func TestSpecMounts(t *testing.T) {
	m := &Manager{paths: PathsUnder("/b")}
	var mounts []Mount
	for _, s := range []string{"/h:/rw", "/h:/ro:ro", "/h:/ov:overlay", "volume:v:/v:ro"} {
		mnt, err := ParseVolume(s)
		if err != nil {
			t.Fatal(err)
		}
		mnt.HostPath = mnt.Source
		if mnt.Kind == MountVolume {
			mnt.HostPath = "/b/data/volumes/v/_data"
		}
		mounts = append(mounts, mnt)
	}
	tmp, _ := ParseTmpfs("/t:size=1m,mode=700,ro")
	mounts = append(mounts, tmp)
	got := m.specMounts("ID", mounts)
	want := []string{
		"bind /h -> /rw [rbind nosuid nodev]",
		"bind /h -> /ro [rbind nosuid nodev ro rro]",
		"bind /b/run/sb/ID/volumes/2 -> /ov [rbind nosuid nodev]",
		"bind /b/data/volumes/v/_data -> /v [rbind nosuid nodev ro rro]",
		"tmpfs tmpfs -> /t [nosuid nodev size=1m mode=700 ro]",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d mounts: %+v", len(got), got)
	}
	for i, g := range got {
		if s := fmt.Sprintf("%s %s -> %s %v", g.Type, g.Source, g.Destination, g.Options); s != want[i] {
			t.Errorf("mount %d = %s, want %s", i, s, want[i])
		}
	}
}
