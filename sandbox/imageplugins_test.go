package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/internal/testimage"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// TestImagePlugins: a sandbox of an image that bothy build made with
// plugins (its version and plugins labels) has them enabled with no
// --plugin, each started on first use; a name this executor does not know
// is skipped and said in the executor's log; a label that names an
// invalid plugin is refused before anything starts. CreateOptions'
// OptionalPlugins are enabled the same way on any image.
func TestImagePlugins(t *testing.T) {
	m := newManagerNS(t, subIDMode())
	ctx := context.Background()
	image := func(name, plugins string) {
		t.Helper()
		archive := filepath.Join(t.TempDir(), name+".oci.tar")
		if err := testimage.BusyboxArchiveWith(archive, testimage.ArchiveOptions{
			Name: name + ":latest", Cmd: []string{"/bin/sh"}, Env: []string{"PATH=/bin:/usr/bin"},
			Labels: map[string]string{"io.bothy.runtime.version": "1", sandbox.RuntimePluginsLabel: plugins},
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Store().ImportOCIArchive(ctx, archive, name+":latest"); err != nil {
			t.Fatal(err)
		}
	}
	image("rt", "jupyter, no-such-plugin")
	sb, err := m.Create(ctx, sandbox.CreateOptions{Image: "rt"})
	if err != nil {
		t.Fatal(err)
	}
	info, err := sb.Client().AliveStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Plugins) != 1 || info.Plugins[0].Name != "jupyter" || info.Plugins[0].State != api.PluginStopped {
		t.Errorf("the image's plugins: %+v, want jupyter alone, stopped until first used", info.Plugins)
	}
	log, _ := os.ReadFile(filepath.Join(sb.Dir, "executor.log"))
	if !strings.Contains(string(log), "no-such-plugin") {
		t.Errorf("executor.log does not name the unknown plugin:\n%s", log)
	}

	// /dev/shm is Docker's 64 MiB, and room for Chromium where the browser
	// plugin is enabled (by the image or by --plugin), unless a size is
	// asked for.
	shm := func(opts sandbox.CreateOptions) string {
		t.Helper()
		sb, err := m.Create(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Remove(ctx, sb.ID, true)
		return run(t, sb, "df -k /dev/shm | tail -1 | awk '{print $2}'")
	}
	if got := run(t, sb, "df -k /dev/shm | tail -1 | awk '{print $2}'"); got != "65536" {
		t.Errorf("/dev/shm with jupyter: %s KiB, want 65536", got)
	}
	image("web", "browser")
	for _, c := range []struct {
		opts sandbox.CreateOptions
		want string
	}{
		{sandbox.CreateOptions{Image: "web"}, fmt.Sprint(sandbox.BrowserShmSize >> 10)},
		{sandbox.CreateOptions{Image: "busybox", Plugins: []string{"browser"}}, fmt.Sprint(sandbox.BrowserShmSize >> 10)},
		{sandbox.CreateOptions{Image: "web", Security: sandbox.Security{ShmSize: 1 << 20}}, "1024"},
	} {
		if got := shm(c.opts); got != c.want {
			t.Errorf("/dev/shm of %s with plugins %v and --shm-size %d: %s KiB, want %s", c.opts.Image, c.opts.Plugins, c.opts.Security.ShmSize, got, c.want)
		}
	}

	// --plugin NAME:eager wins over the image's lazy NAME: started with
	// the sandbox (and unavailable here: busybox has no IPython), listed
	// once.
	eager, err := m.Create(ctx, sandbox.CreateOptions{Image: "rt", Plugins: []string{"jupyter:eager"}})
	if err != nil {
		t.Fatal(err)
	}
	if alive, err := eager.Client().AliveStatus(ctx); err != nil || len(alive.Plugins) != 1 || alive.Plugins[0].Name != "jupyter" || alive.Plugins[0].State == api.PluginStopped {
		t.Errorf("--plugin jupyter:eager on the image's jupyter: %+v, %v; want jupyter once, started", alive, err)
	}

	// Optional plugins (OpenHands' --plugins through bothy serve): the
	// same, on any image.
	opt, err := m.Create(ctx, sandbox.CreateOptions{Image: "busybox", OptionalPlugins: []string{"vscode", "no-such-plugin"}})
	if err != nil {
		t.Fatal(err)
	}
	if alive, err := opt.Client().AliveStatus(ctx); err != nil || len(alive.Plugins) != 1 || alive.Plugins[0].Name != "vscode" {
		t.Errorf("optional plugins: %+v, %v; want vscode alone", alive, err)
	}

	image("hostile", "jupyter,../x")
	if _, err := m.Create(ctx, sandbox.CreateOptions{Image: "hostile"}); err == nil || !strings.Contains(err.Error(), `invalid plugin "../x"`) {
		t.Fatalf("a label naming an invalid plugin: %v", err)
	}
}
