package sandbox_test

import (
	"context"
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
