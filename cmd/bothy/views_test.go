package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// keysOf are the keys of each object of a JSON array, failing unless out
// is one.
func keysOf(t *testing.T, what, out string) []map[string]json.RawMessage {
	t.Helper()
	var list []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%s: not a JSON array of objects: %v: %s", what, err, out)
	}
	return list
}

// hasKeys checks that obj has every key of want (podman's, case and all)
// and none of the old snake_case ones of bothy's records.
func hasKeys(t *testing.T, what string, obj map[string]json.RawMessage, want ...string) {
	t.Helper()
	for _, k := range want {
		if _, ok := obj[k]; !ok {
			t.Errorf("%s: no key %q (podman's); keys: %v", what, k, mapKeys(obj))
		}
	}
	for _, old := range []string{"id", "status", "name", "image", "created", "labels", "api_key", "socket", "upper_dir", "network", "slurm", "pool"} {
		if _, ok := obj[old]; ok {
			t.Errorf("%s: still has bothy's old key %q", what, old)
		}
	}
}

func mapKeys(m map[string]json.RawMessage) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestPodmanKeys: ps, inspect (of a sandbox and of an image), images,
// volume ls/inspect, pool ls, snapshot ls and port print podman's keys
// with --format json, and agree with each other (ps's ImageID is images'
// Id and inspect's Image).
func TestPodmanKeys(t *testing.T) {
	c := newCLI(t)
	id := strings.TrimSpace(c.ok("run", "-d", "--name", "box", "--label", "team=a", "-v", "volume:data:/d", "--memory", "64m", "-e", "A=1", "--", "sleep", "1000"))

	ps := keysOf(t, "ps", c.ok("ps", "--format", "json"))
	if len(ps) != 1 {
		t.Fatalf("ps: %d sandboxes", len(ps))
	}
	hasKeys(t, "ps", ps[0], "Id", "Names", "Image", "ImageID", "Command", "Created", "CreatedAt", "State", "Status",
		"Exited", "ExitCode", "Pid", "Labels", "Ports", "Mounts", "Networks", "AutoRemove", "StartedAt", "ExitedAt", "Restarts", "NetworkMode")
	row := psList(t, c.ok("ps", "--format", "json"))[0]
	if row.Id != id || !slices.Equal(row.Names, []string{"box"}) || row.State != "running" || row.Status != "running" ||
		row.Labels["team"] != "a" || !slices.Equal(row.Command, []string{"sleep", "1000"}) || !slices.Equal(row.Mounts, []string{"/d"}) ||
		row.Pid <= 0 || row.Exited || !slices.Equal(row.Networks, []string{"none"}) || row.Ports == nil {
		t.Errorf("ps: %+v", row)
	}

	imgs := keysOf(t, "images", c.ok("images", "--format", "json"))
	if len(imgs) != 1 {
		t.Fatalf("images: %d", len(imgs))
	}
	hasKeys(t, "images", imgs[0], "Id", "ParentId", "RepoTags", "RepoDigests", "Created", "Size", "SharedSize", "VirtualSize", "Labels", "Names", "Digest", "Dangling", "Layers")
	var images []imageView
	if err := json.Unmarshal([]byte(c.ok("images", "--format", "json")), &images); err != nil || len(images) != 1 {
		t.Fatal(err)
	}
	if images[0].Id != row.ImageID || strings.HasPrefix(images[0].Id, "sha256:") || len(images[0].RepoTags) != 1 {
		t.Errorf("images Id %q RepoTags %v, ps ImageID %q: want the same hex ID", images[0].Id, images[0].RepoTags, row.ImageID)
	}

	insp := keysOf(t, "inspect", c.ok("inspect", "box"))
	hasKeys(t, "inspect", insp[0], "Id", "Created", "Path", "Args", "State", "Image", "ImageName", "Name", "Config", "HostConfig",
		"NetworkSettings", "Mounts", "RestartCount", "Socket", "APIKey", "SocketIdentity", "StateDir", "UpperDir")
	var state map[string]json.RawMessage
	_ = json.Unmarshal(insp[0]["State"], &state)
	hasKeys(t, "inspect State", state, "Status", "Running", "Paused", "Pid", "ExitCode", "StartedAt", "FinishedAt", "OOMKilled", "Dead", "Restarting")
	v := c.inspectView("box")
	if v.Id != id || v.Name != "box" || v.Image != row.ImageID || v.Path != "sleep" || !slices.Equal(v.Args, []string{"1000"}) ||
		v.State.Status != "running" || !v.State.Running || v.State.Pid != row.Pid || v.State.MainPid <= 1 ||
		!slices.Contains(v.Config.Env, "A=1") || v.Config.Labels["team"] != "a" || v.HostConfig.Memory != 64<<20 ||
		v.HostConfig.NetworkMode != "none" || v.HostConfig.RestartPolicy.Name != "no" ||
		len(v.Mounts) != 1 || v.Mounts[0].Type != "volume" || v.Mounts[0].Name != "data" || v.Mounts[0].Destination != "/d" || !v.Mounts[0].RW {
		t.Errorf("inspect: %+v", v)
	}

	// An image by name: podman's image keys; --type says which.
	iinsp := keysOf(t, "inspect IMAGE", c.ok("inspect", row.Image))
	hasKeys(t, "inspect IMAGE", iinsp[0], "Id", "Digest", "RepoTags", "RepoDigests", "Config", "Architecture", "Os", "Size", "RootFS", "Labels", "History")
	if out := c.ok("inspect", "--format", "{{.Id}} {{len .RootFS.Layers}}", row.Image); out != images[0].Id+" 1\n" {
		t.Errorf("inspect --format of an image: %q", out)
	}
	if out := c.ok("image", "inspect", "-f", "{{.ID}}", row.Image); out != images[0].Id+"\n" {
		t.Errorf("image inspect -f '{{.ID}}': %q", out)
	}
	if _, errOut, code := c.run("", "image", "inspect", "box"); code == 0 || !strings.Contains(errOut, "box") {
		t.Errorf("image inspect of a sandbox: exit %d %q", code, errOut)
	}
	if _, errOut, code := c.run("", "inspect", "--type", "image", "box"); code == 0 || !strings.Contains(errOut, "box") {
		t.Errorf("inspect --type image of a sandbox: exit %d %q", code, errOut)
	}
	if _, errOut, code := c.run("", "inspect", "nothing-here"); code == 0 || !strings.Contains(errOut, "no such sandbox or image: nothing-here") {
		t.Errorf("inspect of nothing: exit %d %q", code, errOut)
	}

	vols := keysOf(t, "volume ls", c.ok("volume", "ls", "--format", "json"))
	hasKeys(t, "volume ls", vols[0], "Name", "Driver", "Mountpoint", "CreatedAt", "Labels", "Scope", "Options", "UsedBy")
	vols = keysOf(t, "volume inspect", c.ok("volume", "inspect", "data"))
	hasKeys(t, "volume inspect", vols[0], "Name", "Driver", "Mountpoint", "CreatedAt", "Labels", "Scope", "Options", "UsedBy", "Running")

	c.ok("snapshot", "box", "snap")
	snaps := keysOf(t, "snapshot ls", c.ok("snapshot", "ls", "--format", "json"))
	if len(snaps) != 1 {
		t.Fatalf("snapshot ls: %d", len(snaps))
	}
	hasKeys(t, "snapshot ls", snaps[0], "Id", "Name", "Parent", "Depth", "Stack", "Compacted", "Source", "Image", "Created", "Dir", "Sandboxes", "Complete")
	if out := c.ok("snapshot", "ls", "--format", "{{.Name}} {{.Source}} {{len .Sandboxes}}"); out != "snap "+id+" 1\n" {
		t.Errorf("snapshot ls --format: %q", out)
	}

	c.ok("pool", "create", "--size", "1", "warm")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var pools []poolView
		out := c.ok("pool", "ls", "--format", "json")
		if err := json.Unmarshal([]byte(out), &pools); err != nil || len(pools) != 1 {
			t.Fatalf("pool ls: %v %s", err, out)
		}
		hasKeys(t, "pool ls", keysOf(t, "pool ls", out)[0], "Name", "Image", "Size", "Ready", "Filling", "Created", "Network", "Labels")
		if pools[0].Ready == 1 && !pools[0].Filling {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool never filled: %+v", pools)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out := c.ok("pool", "ls", "--format", "table {{.Name}}\\t{{.Ready}}/{{.Size}}"); !strings.HasPrefix(out, "NAME   READY/SIZE\n") || !strings.Contains(out, "warm   1/1") {
		t.Errorf("pool ls table template:\n%s", out)
	}
	c.ok("pool", "rm", "warm")
}

// TestFormatTemplates: --format takes a Go template, evaluated against the
// same view as json, with podman's conveniences ({{.ID}} short, {{.Names}}
// as text, "table" with a header, \t, json/upper/join/truncate); a bad
// template fails before printing anything, saying why.
func TestFormatTemplates(t *testing.T) {
	c := newCLI(t)
	id := strings.TrimSpace(c.ok("run", "-d", "--name", "tpl", "--label", "b=2", "--label", "a=1", "--", "sleep", "1000"))
	short := id[:12]
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ps", "--format", "{{.ID}} {{.Names}}"}, short + " tpl\n"},
		{[]string{"ps", "--format", "{{.Id}}\t{{.State}}"}, id + "\trunning\n"},
		{[]string{"ps", "--format", "{{.Labels}} {{.Command}} {{upper .State}} {{truncate .Id 4}}"}, "a=1,b=2 sleep 1000 RUNNING " + id[:4] + "\n"},
		{[]string{"ps", "--format", `{{join .Names ","}}`}, ""}, // .Names is text for templates, as podman's
		{[]string{"ps", "--format", "table {{.ID}}\\t{{.Names}}\\t{{.CreatedAt}}"}, ""},
		{[]string{"images", "--format", "{{.Repository}}:{{.Tag}}"}, "localhost/bothy-default:latest\n"},
		{[]string{"inspect", "--format", "{{.State.Status}} {{.Name}} {{.ID}}", "tpl"}, "running tpl " + id + "\n"},
		{[]string{"inspect", "-f", "{{json .Config.Labels}}", "tpl"}, `{"a":"1","b":"2"}` + "\n"},
		{[]string{"inspect", "--format", "{{.State.Status}}", "tpl", "tpl"}, "running\nrunning\n"},
	} {
		out, errOut, code := c.run("", tc.args...)
		switch {
		case strings.Contains(tc.args[2], "join"):
			if code == 0 || !strings.Contains(errOut, "wrong type for value; expected []string; got string") {
				t.Errorf("%v: exit %d %q %q, want a type error", tc.args, code, out, errOut)
			}
		case strings.HasPrefix(tc.args[2], "table"):
			lines := strings.Split(out, "\n")
			if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "SANDBOX ID     NAME   CREATED AT") || !strings.HasPrefix(lines[1], short+"   tpl    ") {
				t.Errorf("%v: exit %d:\n%s%s", tc.args, code, out, errOut)
			}
		case code != 0 || out != tc.want:
			t.Errorf("%v: exit %d, %q (%s), want %q", tc.args, code, out, errOut, tc.want)
		}
	}
	// {{json .}} is the row json prints.
	var viaJSON []psView
	if err := json.Unmarshal([]byte(c.ok("ps", "--format", "json")), &viaJSON); err != nil || len(viaJSON) != 1 {
		t.Fatal(err)
	}
	var viaTemplate psView
	if err := json.Unmarshal([]byte(c.ok("ps", "--format", "{{json .}}")), &viaTemplate); err != nil || viaTemplate.Id != id || viaTemplate.Names[0] != "tpl" || viaTemplate.CreatedAt != viaJSON[0].CreatedAt {
		t.Errorf("ps --format '{{json .}}': %+v %v", viaTemplate, err)
	}
	// inspect without --format, and with json: a JSON array.
	if a, b := c.ok("inspect", "tpl"), c.ok("inspect", "--format", "json", "tpl"); !strings.HasPrefix(a, "[") || len(keysOf(t, "inspect", a)) != 1 || len(keysOf(t, "inspect --format json", b)) != 1 {
		t.Errorf("inspect: %s / %s", a, b)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"ps", "--format", "{{.Nope}}"}, `--format template "{{.Nope}}": template: format:1:2: executing "format" at <.Nope>: can't evaluate field Nope`},
		{[]string{"ps", "--format", "{{.ID"}, `invalid argument "{{.ID" for "--format" flag: bad template "{{.ID": template: format:1: unclosed action`},
		{[]string{"ps", "--format", "yaml"}, `unknown format "yaml": use table or json, or a Go template such as '{{.ID}}'`},
		{[]string{"inspect", "--format", "table", "tpl"}, `unknown format "table": use json`},
		{[]string{"inspect", "--format", "{{.State.Nope}}", "tpl"}, `can't evaluate field Nope`},
		{[]string{"images", "--format", "{{nope .ID}}"}, `function "nope" not defined`},
	} {
		out, errOut, code := c.run("", bad.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, bad.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1, nothing printed and %q", bad.args, code, out, errOut, bad.want)
		}
	}
}
