package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bothy-sandbox/bothy/sandbox"
	"github.com/bothy-sandbox/bothy/serve"
)

func newServeCmd(g *globals) *cobra.Command {
	var (
		listen, keyFile, memory, baseURL string
		opts                             serve.Options
	)
	cmd := &cobra.Command{
		Use:   "serve --listen ADDR:PORT [--api-key-file F]",
		Short: "Serve OpenHands' runtime API over bothy's sandboxes, in the foreground",
		Long: `Serve OpenHands' runtime API (POST /start, /stop, /pause, /resume; GET /sessions/ID,
/runtime/ID, /list, /registry_prefix, /image_exists), as OpenHands' RemoteRuntime, the SDK's
APIRemoteWorkspace and the app server's remote sandbox service call it, and proxy each
runtime's URL (ADDR:PORT/RUNTIME_ID) to its sandbox through the sandbox's Unix socket.

Every route of the API needs X-API-Key: the key in --api-key-file (its first line), or a
random key printed on stderr at start. A runtime's URL needs its session key
(X-Session-API-Key, or ?tkn= once from a browser), except GET /alive and /health.

The server keeps no state: stop it and start it again, and every runtime is still there
and served. docs/serve.md has the mapping of the API onto sandboxes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := readAPIKey(keyFile)
			if err != nil {
				return err
			}
			if keyFile == "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "bothy serve: X-API-Key:", key)
			}
			if memory != "" && memory != "0" {
				if opts.MemoryPerFactor, err = sandbox.ParseBytes(memory); err != nil {
					return fmt.Errorf("--memory-per-factor: %w", err)
				}
			}
			opts.APIKey, opts.BaseURL = key, baseURL
			opts.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			m, err := g.manager()
			if err != nil {
				return err
			}
			opts.Manager = m
			for _, name := range opts.Pools {
				if _, err := m.GetPool(cmd.Context(), name); err != nil {
					return fmt.Errorf("--pool: %w", err)
				}
			}
			opts.Refill = func(pool string) {
				if err := startFiller(g, m, pool); err != nil {
					opts.Log.Warn("refill", "pool", pool, "err", err)
				}
			}
			opts.Compact = func(s *sandbox.Snapshot) {
				if log, err := startCompactor(g, s); err != nil {
					opts.Log.Warn("compact", "snapshot", s.ID, "err", err)
				} else {
					opts.Log.Info("compacting in the background", "snapshot", s.ID, "stack", s.Stack, "log", log)
				}
			}
			srv, err := serve.New(opts)
			if err != nil {
				return err
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", listen, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "bothy serve: listening on http://%s\n", ln.Addr())
			hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
			errc := make(chan error, 1)
			go func() { errc <- hs.Serve(ln) }()
			select {
			case err := <-errc:
				return fmt.Errorf("serve: %w", err)
			case <-cmd.Context().Done():
			}
			// Sandboxes are not touched: they run on, served again by the
			// next bothy serve.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 2*time.Second)
			defer cancel()
			if err := hs.Shutdown(sctx); err != nil {
				hs.Close()
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8990", "TCP address to listen on")
	f.StringVar(&keyFile, "api-key-file", "", "file whose first line is the API key clients send in X-API-Key (default: a random key, printed on stderr)")
	f.StringVar(&baseURL, "url", "", "base URL clients reach this server at, for the runtime URLs it returns (default: http:// and the request's Host)")
	f.StringVar(&memory, "memory-per-factor", "2g", "memory limit of a runtime per unit of resource_factor (0: no limit)")
	f.Float64Var(&opts.CPUsPerFactor, "cpus-per-factor", 1, "CPU limit of a runtime per unit of resource_factor (0: no limit)")
	f.StringVar(&opts.Network, "network", sandbox.NetworkNone, "network of the runtimes' sandboxes (the proxy needs none)")
	f.StringArrayVar(&opts.Pools, "pool", nil, "claim a runtime's sandbox from this pool (bothy pool create; repeatable) when its sandboxes have the image, network and limits the runtime asks for; V0 runtimes only")
	f.StringVar(&opts.RegistryPrefix, "registry-prefix", "localhost/bothy", "what GET /registry_prefix answers")
	f.IntVar(&opts.VSCodePort, "vscode-port", serve.DefaultVSCodePort, "port inside a sandbox that RUNTIME_URL/vscode/ reaches")
	return cmd
}

// readAPIKey reads the first line of path, or makes a random key.
func readAPIKey(path string) (string, error) {
	if path == "" {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		return hex.EncodeToString(b[:]), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read API key: %w", err)
	}
	key, _, _ := strings.Cut(string(b), "\n")
	key = strings.TrimSpace(key)
	if key == "" {
		return "", fmt.Errorf("read API key: %s: the first line is empty", path)
	}
	return key, nil
}

func newPortForwardCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "port-forward SANDBOX [HOSTADDR:]HOSTPORT:PORT",
		Short: "Forward a host TCP port to a port on the sandbox's loopback, in the foreground",
		Long: `Listen on HOSTADDR:HOSTPORT (127.0.0.1 unless given; HOSTPORT 0 picks a free port) and
forward every connection to PORT on the sandbox's own loopback through its executor's Unix
socket, until interrupted. It needs no network in the sandbox (--network none works).`,
		Example: `  bothy port-forward box 8080:8000
  bothy port-forward box 0.0.0.0:0:3000`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, port, err := parseForward(args[1])
			if err != nil {
				return err
			}
			m, err := g.manager()
			if err != nil {
				return err
			}
			sb, err := m.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if sb.Status != sandbox.StatusRunning {
				return fmt.Errorf("sandbox %s is %s", sb.ShortID(), sb.Status)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", addr, err)
			}
			c := sb.Client()
			defer c.Close()
			fmt.Fprintf(cmd.ErrOrStderr(), "Forwarding from %s -> %d\n", ln.Addr(), port)
			return c.Forward(cmd.Context(), ln, port, func(err error) {
				fmt.Fprintln(cmd.ErrOrStderr(), "bothy port-forward:", err)
			})
		},
	}
	return cmd
}

// parseForward reads [HOSTADDR:]HOSTPORT:PORT.
func parseForward(s string) (listen string, port int, err error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return "", 0, fmt.Errorf("invalid forward %q: want [HOSTADDR:]HOSTPORT:PORT", s)
	}
	host, p := s[:i], s[i+1:]
	port, err = strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("invalid forward %q: PORT %q is not 1-65535", s, p)
	}
	addr, hp := "127.0.0.1", host
	if j := strings.LastIndex(host, ":"); j >= 0 {
		addr, hp = strings.Trim(host[:j], "[]"), host[j+1:]
	}
	n, err := strconv.Atoi(hp)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("invalid forward %q: HOSTPORT %q is not 0-65535", s, hp)
	}
	if addr == "" {
		return "", 0, errors.New("invalid forward " + strconv.Quote(s) + ": empty HOSTADDR")
	}
	return net.JoinHostPort(addr, strconv.Itoa(n)), port, nil
}
