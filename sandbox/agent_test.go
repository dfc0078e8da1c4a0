package sandbox_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// The agent API inside a real sandbox on the default image (bash, python3),
// through the OpenHands dialect as an OpenHands client would drive it.
func TestAgentAPIOnDefaultImage(t *testing.T) {
	if os.Getenv("BOTHY_DEFAULT_IMAGE") == "" {
		t.Skip("requires the default image: run through make test, which builds it and sets BOTHY_DEFAULT_IMAGE")
	}
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, sandbox.CreateOptions{APIKey: "k3y"}) // no image: the default one
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(sb.Socket).ServerInfo(ctx); err == nil {
		t.Error("server_info answered without the API key")
	}
	c := client.New(sb.Socket, client.WithAPIKey("k3y"))
	defer c.Close()

	runCmd := func(command string) (string, api.CmdOutputExtras) {
		t.Helper()
		a, err := api.NewAction("run", map[string]any{"command": command}, nil)
		if err != nil {
			t.Fatal(err)
		}
		obs, err := c.ExecuteAction(ctx, a)
		if err != nil {
			t.Fatalf("run %q: %v", command, err)
		}
		var extras api.CmdOutputExtras
		if err := json.Unmarshal(obs.Extras, &extras); err != nil || obs.Observation != "run" {
			t.Fatalf("run %q: observation %q extras %s: %v", command, obs.Observation, obs.Extras, err)
		}
		return obs.Content, extras
	}
	// The session persists cwd and environment between actions.
	runCmd("cd /tmp && export X=41")
	out, extras := runCmd("echo $((X+1)); python3 -c 'import sys; print(sys.version_info.major)'")
	if !strings.Contains(out, "42\n3") || extras.Metadata.ExitCode != 0 ||
		extras.Metadata.WorkingDir == nil || *extras.Metadata.WorkingDir != "/tmp" {
		t.Errorf("run: %q, metadata %+v", out, extras.Metadata)
	}
	if !strings.Contains(extras.Metadata.Suffix, "[The command completed with exit code 0.]") {
		t.Errorf("suffix %q", extras.Metadata.Suffix)
	}
	if _, extras := runCmd("false"); extras.Metadata.ExitCode != 1 {
		t.Errorf("exit code of false: %d", extras.Metadata.ExitCode)
	}

	// The editor, as str_replace_editor.
	edit := func(args map[string]any) *api.Observation {
		t.Helper()
		args["impl_source"] = "oh_aci"
		a, err := api.NewAction("edit", args, nil)
		if err != nil {
			t.Fatal(err)
		}
		obs, err := c.ExecuteAction(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	edit(map[string]any{"command": "create", "path": "/root/app.py", "file_text": "print('hello')\n"})
	if obs := edit(map[string]any{"command": "str_replace", "path": "/root/app.py", "old_str": "hello", "new_str": "bothy"}); !strings.Contains(obs.Content, "has been edited") {
		t.Errorf("str_replace: %q", obs.Content)
	}
	if out, _ := runCmd("python3 /root/app.py"); !strings.Contains(out, "bothy") {
		t.Errorf("edited program printed %q", out)
	}
	if obs := edit(map[string]any{"command": "str_replace", "path": "/root/app.py", "old_str": "nothere", "new_str": "x"}); !strings.Contains(obs.Content, "did not appear verbatim") {
		t.Errorf("str_replace of a missing string: %q", obs.Content)
	}
}

// A session command that blows the memory limit is reported as OOM-killed to
// both dialects, and the session lives on.
func TestSessionOOMKilled(t *testing.T) {
	if os.Getenv("BOTHY_DEFAULT_IMAGE") == "" {
		t.Skip("requires the default image: run through make test, which builds it and sets BOTHY_DEFAULT_IMAGE")
	}
	m := newManager(t)
	ctx := context.Background()
	sb := createLimited(t, m, sandbox.CreateOptions{Limits: sandbox.Limits{Memory: 96 << 20}})
	c := sb.Client()
	defer c.Close()
	bomb := "python3 -c 'bytearray(300 << 20)'"
	res, err := c.RunSession(ctx, api.DefaultSession, api.SessionRunRequest{Command: bomb, Blocking: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 137 || !res.OOMKilled || !strings.Contains(res.Observation, "killed by the OOM killer") {
		t.Errorf("native session: exit %d, oom_killed %v, observation %q", res.ExitCode, res.OOMKilled, res.Observation)
	}
	a, err := api.NewAction("run", map[string]any{"command": bomb}, nil)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := c.ExecuteAction(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	var extras api.CmdOutputExtras
	if err := json.Unmarshal(obs.Extras, &extras); err != nil || extras.Metadata.ExitCode != 137 ||
		!strings.Contains(extras.Metadata.Suffix, "killed by the OOM killer") {
		t.Errorf("OpenHands run: %v, metadata %+v", err, extras.Metadata)
	}
	// An ordinary failure says nothing of the kind, and the session lives on.
	res, err = c.RunSession(ctx, api.DefaultSession, api.SessionRunRequest{Command: "sh -c 'kill -9 $$'; echo after", Blocking: true})
	if err != nil || strings.Contains(res.Observation, "OOM") || !strings.Contains(res.Output, "after") {
		t.Errorf("after the OOM kill: %v %+v", err, res)
	}
	if err := m.Remove(ctx, sb.ID, true); err != nil {
		t.Fatal(err)
	}
}
