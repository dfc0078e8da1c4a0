package executor

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

// Pool mode (Config.Pool, bothy-executor --pool). A pooled sandbox is
// started before anyone asks for it: its executor serves, but nothing of
// the API exists yet. It answers GET /alive and, once, POST
// /v1/pool/claim, authenticated with the pre-claim key it was started
// with; every other request is refused with 403. The claim gives it its
// API key, environment and working directory, and only then is the Server
// built, with them, as if the executor had been started with them: no
// session, process or plugin exists before (nothing can have been left by
// anyone), and the pre-claim key opens nothing after.

// maxClaimBody caps the claim's JSON body.
const maxClaimBody = 1 << 20

// poolGate is the handler of an executor in pool mode.
type poolGate struct {
	key  [sha256.Size]byte // hash of the pre-claim key
	opts Options           // the Server's options but for the claim's
	// newServer builds the Server once claimed (New, or a test's).
	newServer func(Options) (*Server, error)

	mu      sync.Mutex
	server  *Server       // set once claimed
	claimed chan struct{} // closed once claimed
}

func newPoolGate(preClaimKey string, opts Options) (*poolGate, error) {
	if preClaimKey == "" {
		return nil, errors.New("pool mode needs the pre-claim key (--api-key or $" + APIKeyEnv + ")")
	}
	return &poolGate{key: sha256.Sum256([]byte(preClaimKey)), opts: opts, newServer: New, claimed: make(chan struct{})}, nil
}

// Claimed returns the Server once claimed (and nil before), and a channel
// closed at the claim.
func (g *poolGate) Claimed() (*Server, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.server, g.claimed
}

func (g *poolGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s, _ := g.Claimed(); s != nil {
		s.handler.ServeHTTP(w, r)
		return
	}
	switch {
	case r.URL.Path == "/alive" && r.Method == http.MethodGet:
		httpapi.WriteJSON(w, http.StatusOK, api.Alive{Status: "ok"})
	case r.URL.Path == api.PoolClaimPath && r.Method == http.MethodPost:
		g.claim(w, r)
	default:
		httpapi.WriteError(w, http.StatusForbidden, api.CodeForbidden, "this sandbox is in a pool and has not been claimed: only its claim is served")
	}
}

// claim answers POST /v1/pool/claim.
func (g *poolGate) claim(w http.ResponseWriter, r *http.Request) {
	got := sha256.Sum256([]byte(r.Header.Get(api.APIKeyHeader)))
	if subtle.ConstantTimeCompare(got[:], g.key[:]) != 1 {
		httpapi.WriteError(w, http.StatusForbidden, api.CodeForbidden, "missing or wrong "+api.APIKeyHeader)
		return
	}
	t0 := time.Now()
	var c api.PoolClaim
	if err := httpapi.Decode(io.LimitReader(r.Body, maxClaimBody), &c); err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, "decode claim: "+err.Error())
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.server != nil {
		// Not reached through ServeHTTP (the Server answers once
		// claimed), but a claim racing the first one lands here.
		httpapi.WriteError(w, http.StatusConflict, api.CodeConflict, "this sandbox has been claimed")
		return
	}
	opts, err := claimOptions(g.opts, c)
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	// The working directory last: nothing else can fail after it.
	if c.Workdir != "" {
		if err := enterWorkdir(c.Workdir); err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
			return
		}
	}
	s, err := g.newServer(opts)
	if err != nil {
		httpapi.WriteError(w, http.StatusInternalServerError, api.CodeInternal, "start the API: "+err.Error())
		return
	}
	g.server = s
	close(g.claimed)
	opts.Logger.Info("claimed", "env", len(c.Env), "workdir", c.Workdir, "took", time.Since(t0))
	httpapi.WriteJSON(w, http.StatusOK, struct{}{})
}

// warm builds a Server with the pool's options and drops it, before any
// claim: the claim's own Server then reuses its mux (sharedMux) and finds
// the code it runs paged in. Plugins are not started.
func (g *poolGate) warm() {
	opts := g.opts
	opts.EagerPlugins, opts.EagerPluginNames = false, nil
	opts.Logger = slog.New(slog.DiscardHandler)
	if s, err := g.newServer(opts); err == nil {
		s.Close()
	}
}

// claimOptions are base with the claim's key and environment.
func claimOptions(base Options, c api.PoolClaim) (Options, error) {
	if c.APIKey == "" {
		return base, errors.New("claim: api_key is empty")
	}
	if c.Workdir != "" && !filepath.IsAbs(c.Workdir) {
		return base, fmt.Errorf("claim: workdir %q is not an absolute path", c.Workdir)
	}
	env := slices.Clone(base.Env)
	for _, kv := range c.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return base, fmt.Errorf("claim: environment entry %q is not KEY=VALUE", kv)
		}
		if k == APIKeyEnv {
			return base, fmt.Errorf("claim: %s is not passed to processes", APIKeyEnv)
		}
		env = slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") })
		env = append(env, kv)
	}
	base.Env, base.APIKey = env, c.APIKey
	return base, nil
}

// enterWorkdir makes dir if missing and makes it the executor's working
// directory, as the runtime does for a sandbox started with it. PWD in the
// processes' environment follows the shell, as in a fresh sandbox.
func enterWorkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("claim: make workdir: %w", err)
	}
	if err := os.Chdir(dir); err != nil {
		return fmt.Errorf("claim: enter workdir: %w", err)
	}
	return nil
}

// runPool is Run for an executor in pool mode: it serves the gate until
// the claim, then the Server it built, like Run.
func runPool(ctx context.Context, cfg Config, sigs <-chan os.Signal) (int, error) {
	log := cfg.Server.Logger
	if len(cfg.Main) > 0 {
		return 2, errors.New("pool mode takes no main command: it would run before the claim")
	}
	g, err := newPoolGate(cfg.Server.APIKey, cfg.Server)
	if err != nil {
		return 2, err
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = Listen(cfg.Socket); err != nil {
			return 1, err
		}
	}
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServe()
	errc := make(chan error, 1)
	go func() { errc <- serveHTTP(serveCtx, ln, g, serveCtx, cfg.Server.withDefaults()) }()
	log.Info("serving, pooled: waiting for a claim", "socket", cfg.Socket, "pid", os.Getpid())
	signalReady(cfg.Ready, log)
	go g.warm()
	_, claimed := g.Claimed()
	select {
	case sig := <-sigs:
		// Nothing was started: nothing to forward the signal to.
		log.Info("signal received before the claim", "signal", sig.String())
		stopServe()
		return 0, <-errc
	case <-ctx.Done():
		stopServe()
		return 0, <-errc
	case err := <-errc:
		return 1, err
	case <-claimed:
	}
	s, _ := g.Claimed()
	defer s.Close()
	code, forward, served, runErr := s.waitForEnd(ctx, false, sigs, errc)
	s.shutdown(ctx, sigs, forward, cfg.Grace)
	stopServe()
	if !served {
		runErr = <-errc
	}
	return code, runErr
}
