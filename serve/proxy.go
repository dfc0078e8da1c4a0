package serve

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// sessionCookie carries a runtime's session key for browsers (VS Code, the
// agent's web apps), set when a request brought it as ?tkn=.
const sessionCookie = "bothy_session_key"

// proxy sends a runtime URL's requests to its sandbox: to the executor's
// socket, or to a port inside the sandbox through the executor's port
// forwarding. Its transports (one per sandbox and target, keeping
// connections alive) are a cache: nothing in them is state.
type proxy struct {
	m   Manager
	log *slog.Logger

	mu         sync.Mutex
	transports map[string]*http.Transport
	records    map[string]record
}

// record is a sandbox's state as read at one time: reading it from disk
// costs more than the rest of a proxied request, so it is read again after
// recordTTL (the socket identity and keys in it never change).
type record struct {
	sb   *sandbox.Sandbox
	read time.Time
}

const recordTTL = time.Second

// get reads the sandbox id, from the cache when it is fresh.
func (p *proxy) get(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	p.mu.Lock()
	r, ok := p.records[id]
	p.mu.Unlock()
	if ok && time.Since(r.read) < recordTTL {
		return r.sb, nil
	}
	sb, err := p.m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.records[id] = record{sb: sb, read: time.Now()}
	p.mu.Unlock()
	return sb, nil
}

func newProxy(m Manager, log *slog.Logger) *proxy {
	return &proxy{m: m, log: log, transports: map[string]*http.Transport{}, records: map[string]record{}}
}

func (p *proxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.transports {
		t.CloseIdleConnections()
	}
}

// forget drops the transports of a removed sandbox.
func (p *proxy) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.records, id)
	for k, t := range p.transports {
		if strings.HasPrefix(k, id+"/") {
			t.CloseIdleConnections()
			delete(p.transports, k)
		}
	}
}

// transport returns the transport to sb's executor (port 0) or to a port
// inside it. Each connection is a new connection to the sandbox's socket,
// opened without following a path the sandbox could replace and checked
// against the socket recorded at create (sandbox.Sandbox.Client).
func (p *proxy) transport(sb *sandbox.Sandbox, port int) *http.Transport {
	key := sb.ID + "/" + strconv.Itoa(port)
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.transports[key]; ok {
		return t
	}
	c := sb.Client()
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		if port == 0 {
			return c.DialSocket(ctx)
		}
		return c.DialPort(ctx, port)
	}
	t := &http.Transport{
		DialContext:         dial,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	p.transports[key] = t
	return t
}

// target is where a path under a runtime's URL goes: a port inside the
// sandbox (0: the executor) and the path there.
func target(sb *sandbox.Sandbox, rest string, o Options) (port int, path string) {
	for prefix, port := range map[string]int{"/vscode": o.VSCodePort, "/work-1": o.WorkPorts[0], "/work-2": o.WorkPorts[1]} {
		if rest == prefix || strings.HasPrefix(rest, prefix+"/") {
			return port, "/" + strings.TrimPrefix(strings.TrimPrefix(rest, prefix), "/")
		}
	}
	if v := sb.Labels[LabelPort]; v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 && n < 65536 {
			return n, rest
		}
	}
	return 0, rest
}

// public: readiness probes answered without the session key (OpenHands
// polls /alive, the SDK's workspace /health, without it).
func public(r *http.Request, port int, path string, sb *sandbox.Sandbox) bool {
	main := port == 0 || strconv.Itoa(port) == sb.Labels[LabelPort]
	return main && (r.Method == http.MethodGet || r.Method == http.MethodHead) && (path == "/alive" || path == "/health")
}

// sessionKey returns the session key the request carries: the header, the
// ?tkn= of a browser's first visit, or the cookie that visit set.
func sessionKey(r *http.Request) (key string, fromQuery bool) {
	if k := r.Header.Get(api.APIKeyHeader); k != "" {
		return k, false
	}
	if k := r.URL.Query().Get("tkn"); k != "" {
		return k, true
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		return c.Value, false
	}
	return "", false
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request, id, rest string, o Options) {
	ctx := r.Context()
	sb, err := p.get(ctx, id)
	if err != nil || sb.ID != id || sb.Labels[LabelSession] == "" {
		if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		p.forget(id)
		writeError(w, http.StatusNotFound, "runtime "+id+" not found")
		return
	}
	if sb.Status != sandbox.StatusRunning {
		p.forget(id)
		writeError(w, http.StatusNotFound, "runtime "+id+" is "+string(sb.Status))
		return
	}
	port, path := target(sb, rest, o)
	key, fromQuery := sessionKey(r)
	authorized := key != "" && subtle.ConstantTimeCompare([]byte(key), []byte(sb.APIKey)) == 1
	if !authorized && !public(r, port, path, sb) {
		writeError(w, http.StatusUnauthorized, "missing or wrong "+api.APIKeyHeader)
		return
	}
	// A frozen executor would accept the connection and never answer:
	// say it is paused (RemoteRuntime resumes it on 503).
	if paused, _ := p.m.Paused(sb); paused {
		writeError(w, http.StatusServiceUnavailable, "runtime "+id+" is paused")
		return
	}
	if authorized && fromQuery {
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: key, Path: "/" + id + "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
	rp := &httputil.ReverseProxy{
		Transport:     p.transport(sb, port),
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", "sandbox", "sandbox"
			pr.Out.URL.Path, pr.Out.URL.RawPath = path, ""
			// serve's own key never reaches a sandbox; the session key
			// does, as a header, whichever way it came.
			pr.Out.Header.Del("X-API-Key")
			if authorized {
				pr.Out.Header.Set(api.APIKeyHeader, key)
			}
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			status := http.StatusBadGateway
			var ae *api.Error
			if errors.As(err, &ae) && ae.Code != api.CodeBadGateway {
				status = ae.Status
			}
			if errors.Is(err, client.ErrUntrustedSocket) {
				p.log.Error("proxy: untrusted socket", "runtime", id, "err", err)
			}
			if r.Context().Err() == nil {
				writeError(w, status, err.Error())
			}
		},
	}
	rp.ServeHTTP(w, r)
}
