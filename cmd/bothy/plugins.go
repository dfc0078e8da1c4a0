package main

import (
	"context"
	"net/netip"
	"strconv"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// pluginView is one enabled plugin of a running sandbox, as inspect shows
// it: its state from the executor and, for a plugin that listens on a port
// the sandbox publishes (VS Code's), the URL the host reaches it at and,
// once it runs, its connection token (code-server's password).
type pluginView struct {
	Name  string `json:"Name"`
	State string `json:"State"`
	Error string `json:"Error,omitempty"`
	RSS   *int64 `json:"RSS,omitempty"`
	Port  int    `json:"Port,omitempty"`
	URL   string `json:"URL,omitempty"`
	Token string `json:"Token,omitempty"`
}

// pluginAsk bounds what inspect and port wait for an executor: a sandbox
// whose executor does not answer shows no plugins, never a hang.
const pluginAsk = 2 * time.Second

// sandboxPlugins asks the executor of a sandbox whose state (viewer.state)
// is running for its enabled plugins (GET /alive, which starts none); nil
// when none is, or it does not answer. Any other state gets nil: a paused
// sandbox's executor is frozen, a stopped one's is gone. With tokens, a
// running plugin's token is asked for too (a stopped one is not: asking
// would start it).
func sandboxPlugins(ctx context.Context, sb *sandbox.Sandbox, state string, tokens bool) []pluginView {
	if state != string(sandbox.StatusRunning) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, pluginAsk)
	defer cancel()
	c := sb.Client()
	defer c.Close()
	alive, err := c.AliveStatus(ctx)
	if err != nil {
		return nil
	}
	var out []pluginView
	for _, p := range alive.Plugins {
		v := pluginView{Name: p.Name, State: p.State, Error: p.Error, RSS: p.RSS, Port: p.Port}
		if p.Port > 0 {
			v.URL = publishedURL(sb.Ports(), p.Port)
		}
		if tokens && v.Name == "vscode" && p.State == api.PluginRunning {
			v.Token, _ = c.VSCodeToken(ctx)
		}
		out = append(out, v)
	}
	return out
}

// publishedURL is the http URL at which the host reaches the sandbox's TCP
// port, published among ports ("": it is not). An address that binds
// every address is reached on loopback.
func publishedURL(ports []network.Port, port int) string {
	for _, p := range ports {
		if int(p.ContainerPort) != port || p.Proto != "tcp" {
			continue
		}
		ip := p.HostIP
		switch {
		case ip == netip.IPv4Unspecified() || !ip.IsValid():
			ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		case ip == netip.IPv6Unspecified():
			ip = netip.IPv6Loopback()
		}
		return "http://" + netip.AddrPortFrom(ip, p.HostPort).String() + "/"
	}
	return ""
}

// pluginLines are what bothy port prints after the mappings: NAME: URL for
// each plugin reached through a published port.
func pluginLines(plugins []pluginView) []string {
	var out []string
	for _, p := range plugins {
		if p.URL != "" {
			out = append(out, p.Name+": "+p.URL+" (port "+strconv.Itoa(p.Port)+", plugin "+p.State+")")
		}
	}
	return out
}
