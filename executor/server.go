package executor

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/info"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
	"github.com/bothy-sandbox/bothy/executor/reap"
)

// maxHeaderBytes caps a request's line and headers (a path of PATH_MAX
// bytes, escaped, fits).
const maxHeaderBytes = 32 << 10

// Route is one entry of the API. Every route the Server answers is in the
// table Routes returns, each service contributing its own.
type Route = httpapi.Route

// Server is the executor's HTTP API: the route table of its services, the
// API key, activity tracking, the memory budgets they share, and shutdown.
// The services (see services.go) do the rest.
type Server struct {
	opts      Options
	key       *[sha256.Size]byte // hash of the API key; nil: no auth
	routes    []Route
	handler   http.Handler
	wrapped   []http.Handler // by entries' index, for the shared mux
	active    *activity
	reqMem    *budget.Memory // what requests in flight hold (Options.RequestMemory)
	fileCalls budget.Calls   // the requests in the file system at once (Route.Files)
	reaper    *reap.Reaper
	ownReap   bool
	services  services
	ctx       context.Context // of every request; done once the Server is closed
	cancel    context.CancelFunc
	// mainLogged is closed once the main command's output is all in its
	// log (StartMainDir).
	mainLogged chan struct{}

	closeOnce sync.Once
}

// New returns a Server; Serve it on a listener.
func New(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	s := &Server{opts: opts, active: newActivity(), reaper: opts.Reaper}
	if opts.APIKey != "" {
		h := sha256.Sum256([]byte(opts.APIKey))
		s.key = &h
	}
	if s.reaper == nil {
		r, err := reap.New(reap.Options{})
		if err != nil {
			return nil, fmt.Errorf("start reaper: %w", err)
		}
		s.reaper, s.ownReap = r, true
	}
	freer := budget.NewReturner(time.Second)
	s.reqMem = budget.NewMemory(opts.RequestMemory, freer.Schedule)
	outMem := budget.NewOutput(opts.OutputMemory, freer.Schedule)
	s.fileCalls = budget.NewCalls(budget.MaxFileCalls)
	svcs, err := newServices(opts, s.reaper, s.reqMem, s.fileCalls, outMem, s.active)
	if err != nil {
		if s.ownReap {
			s.reaper.Close()
		}
		return nil, err
	}
	s.services = svcs
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.routes = svcs.routes()
	s.handler = s.buildHandler()
	return s, nil
}

// Reaper returns the Reaper through which every process must be started.
func (s *Server) Reaper() *reap.Reaper { return s.reaper }

// Handler returns the HTTP handler of the API (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// Routes returns the route table: /alive first, then the native API under
// /v1, the OpenHands dialect and the plugins' routes.
func (s *Server) Routes() []Route { return s.routes }

// Info gathers what GET /v1/info answers.
func (s *Server) Info() *api.Info { return s.services.info.Info() }

func (s *Server) buildHandler() http.Handler {
	entries := s.entries()
	s.wrapped = make([]http.Handler, len(entries))
	for i, e := range entries {
		s.wrapped[i] = s.wrap(e.route)
	}
	mux := sharedMux(entries)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), serverKey{}, s)))
	})
}

// A muxEntry is one pattern of the handler: a route, the JSON 405 of a
// path some other method has, or the JSON 404.
type muxEntry struct {
	pattern string
	route   Route
}

// entries lists the handler's patterns: the routes, then a 405 for each
// path with another method, then the 404. The bare ServeMux answers 404 and
// 405 in plain text; these answer them in JSON (still behind auth, so the
// API surface is not probed for free).
func (s *Server) entries() []muxEntry {
	var out []muxEntry
	allow := map[string][]string{}
	var paths []string
	for _, rt := range s.routes {
		if rt.Method == "" { // every method: a plugin's prefix
			out = append(out, muxEntry{rt.Path, rt})
			continue
		}
		out = append(out, muxEntry{rt.Method + " " + rt.Path, rt})
		if _, ok := allow[rt.Path]; !ok {
			paths = append(paths, rt.Path)
		}
		allow[rt.Path] = append(allow[rt.Path], rt.Method)
	}
	for _, p := range paths {
		methods := strings.Join(allow[p], ", ")
		out = append(out, muxEntry{p, Route{Path: p, Handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", methods)
			httpapi.WriteError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed,
				fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, p, methods))
		}}})
	}
	return append(out, muxEntry{"/", Route{Path: "/", Handler: func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, http.StatusNotFound, api.CodeNotFound, "no route for "+r.Method+" "+r.URL.Path)
	}}})
}

// serverKey is the request context's key for the Server a shared mux
// dispatches to.
type serverKey struct{}

// muxes are the ServeMuxes built so far, by pattern list. Registering a
// pattern is the costly part of a Server's construction (pattern parsing,
// conflict checks and a runtime.Caller each: about 0.7 ms for the API's
// 80-odd patterns, on the path to ready at every start and at every pool
// claim), and the pattern list is the same for every Server of a process:
// so a mux is built once, its handlers finding the Server in the request's
// context, and shared.
var muxes struct {
	sync.Mutex
	m map[string]*http.ServeMux
}

// sharedMux returns the mux for entries' patterns, whose i-th pattern runs
// the serving Server's wrapped[i].
func sharedMux(entries []muxEntry) *http.ServeMux {
	var sig strings.Builder
	for _, e := range entries {
		sig.WriteString(e.pattern)
		sig.WriteByte('\n')
	}
	muxes.Lock()
	defer muxes.Unlock()
	if mux, ok := muxes.m[sig.String()]; ok {
		return mux
	}
	mux := http.NewServeMux()
	for i, e := range entries {
		mux.Handle(e.pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Context().Value(serverKey{}).(*Server).wrapped[i].ServeHTTP(w, r)
		}))
	}
	if muxes.m == nil {
		muxes.m = map[string]*http.ServeMux{}
	}
	muxes.m[sig.String()] = mux
	return mux
}

// wrap adds auth, activity tracking, the file system bound (Route.Files)
// and panic recovery to a route.
func (s *Server) wrap(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.Public && !s.authorized(r) {
			httpapi.WriteError(w, http.StatusForbidden, api.CodeForbidden, "missing or wrong "+api.APIKeyHeader)
			return
		}
		if !rt.Quiet {
			s.active.touch()
			defer s.active.touch()
		}
		if rt.Files {
			if err := s.fileCalls.Acquire(r.Context()); err != nil {
				return // the client has gone
			}
			defer s.fileCalls.Release()
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.opts.Logger.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v)
				httpapi.WriteError(w, http.StatusInternalServerError, api.CodeInternal, "internal error")
			}
		}()
		rt.Handler(w, r)
	})
}

// authorized reports whether r carries the API key (any request does
// without one).
func (s *Server) authorized(r *http.Request) bool {
	if s.key == nil {
		return true
	}
	got := sha256.Sum256([]byte(r.Header.Get(api.APIKeyHeader)))
	return subtle.ConstantTimeCompare(got[:], s.key[:]) == 1
}

// activity tracks when the server started and when a request that counts
// as activity last began or ended.
type activity struct {
	started time.Time
	last    atomic.Int64 // unix nanos
}

var _ info.Activity = (*activity)(nil)

func newActivity() *activity {
	a := &activity{started: time.Now()}
	a.last.Store(a.started.UnixNano())
	return a
}

func (a *activity) touch()                { a.last.Store(time.Now().UnixNano()) }
func (a *activity) Started() time.Time    { return a.started }
func (a *activity) LastActive() time.Time { return time.Unix(0, a.last.Load()) }

// Serve answers on ln until ctx is done or Close is called, then stops
// accepting, gives open requests a moment and closes them. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-s.ctx.Done():
			stop()
		case <-ctx.Done():
		}
	}()
	return serveHTTP(ctx, ln, s.handler, s.ctx, s.opts)
}

// serveHTTP answers on ln with h until ctx is done, then stops accepting,
// gives open requests a moment and closes them. It closes ln. Requests'
// contexts derive from base.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, base context.Context, opts Options) error {
	// Each connection costs memory (buffers, a goroutine, its headers):
	// their number and their headers are capped, and idle ones closed.
	ln = newLimitListener(ln, opts.MaxConns)
	// A header deadline that passes while the executor is starved of CPU
	// (a loaded host weighs the sandbox's cgroup against all its other
	// processes) closes the connection unanswered, and the client reads
	// EOF. Only the owner can connect (the socket is the host's, 0600):
	// the deadline frees a stuck client's connection slot, it stops no
	// attack, so it is generous.
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// Close kills every process the Server started (process groups, SIGKILL),
// ends the requests in flight and releases the Server's resources. It does
// not wait for the kills to be reaped.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.services.close()
		if s.ownReap {
			s.reaper.Close()
		}
	})
	return nil
}

// limitListener is netutil.LimitListener whose connections keep their
// half-closes (CloseWrite, CloseRead): a forwarded port (/v1/ports) passes
// a client's half-close on.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

// Close closes the listener, and ends an Accept waiting for a free slot.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: sync.OnceFunc(func() { <-l.sem })}, nil
}

type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// NetConn returns the accepted connection: /v1/ports/{port}/fd passes a
// descriptor over it (SCM_RIGHTS).
func (c *limitConn) NetConn() net.Conn { return c.Conn }

func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *limitConn) CloseRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return nil
}
