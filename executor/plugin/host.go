// Package plugin is the executor's plugin host: it runs the services of
// the enabled plugins (package plugins: one package per plugin, each with
// its recipe and its service), each started once, on first use or with
// the executor (Eager), its start bounded by StartTimeout. It reports each
// plugin's state, hands the OpenHands actions a plugin claims to its
// service, and serves each plugin's own routes under /plugins/NAME/.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/internal/proc"
	"github.com/bothy-sandbox/bothy/plugins"
)

// errClosed is what a closed host answers.
var errClosed = errors.New("the plugin host is closed: the executor is shutting down")

// DefaultStartTimeout bounds a plugin's start when Options leaves it 0.
const DefaultStartTimeout = 2 * time.Minute

// Options configure a Host.
type Options struct {
	// Env is what the plugins' services are given.
	Env plugins.Env
	// Eager starts every plugin with the host instead of on first use;
	// EagerNames starts those named.
	Eager      bool
	EagerNames []string
	// StartTimeout bounds each start (DefaultStartTimeout when 0): a
	// plugin not serving by then has failed, whatever its Start does.
	StartTimeout time.Duration
	// Reserved are action types no plugin may claim (the executor's own).
	Reserved []string
}

// Host runs the enabled plugins. It is safe for concurrent use.
type Host struct {
	opts     Options
	entries  []*entry          // in the order given
	byAction map[string]*entry // by the action types they claim
	ctx      context.Context   // ends every start at Close
	cancel   context.CancelFunc
}

// entry is one plugin and its service's life.
type entry struct {
	p     plugins.Plugin
	mu    sync.Mutex
	state string
	err   error
	svc   plugins.Service
	done  chan struct{} // closed once the start has ended; nil before it began
}

// New returns a host for ps; two plugins cannot share a name or claim the
// same action, nor a reserved one. With Eager, every start begins now.
func New(ps []plugins.Plugin, opts Options) (*Host, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	h := &Host{opts: opts, byAction: map[string]*entry{}}
	for _, p := range ps {
		if slices.ContainsFunc(h.entries, func(e *entry) bool { return e.p.Name() == p.Name() }) {
			return nil, fmt.Errorf("plugin %s: enabled twice", p.Name())
		}
		e := &entry{p: p, state: api.PluginStopped}
		for _, a := range p.Actions() {
			if slices.Contains(opts.Reserved, a) {
				return nil, fmt.Errorf("plugin %s: action %q is executed by the executor itself", p.Name(), a)
			}
			if q, ok := h.byAction[a]; ok {
				return nil, fmt.Errorf("plugin %s: action %q is claimed by plugin %s", p.Name(), a, q.p.Name())
			}
			h.byAction[a] = e
		}
		h.entries = append(h.entries, e)
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	for _, n := range opts.EagerNames {
		if !slices.ContainsFunc(h.entries, func(e *entry) bool { return e.p.Name() == n }) {
			return nil, fmt.Errorf("plugin %s: started eagerly but not enabled", n)
		}
	}
	for _, e := range h.entries {
		if opts.Eager || slices.Contains(opts.EagerNames, e.p.Name()) {
			h.start(e)
		}
	}
	return h, nil
}

// start begins e's start unless it has begun, and returns the channel
// closed when it has ended.
func (h *Host) start(e *entry) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done == nil {
		e.done = make(chan struct{})
		e.state = api.PluginStarting
		go h.run(e)
	}
	return e.done
}

// run starts e's service, waiting at most StartTimeout: a Start that does
// not return in time has failed, and the service it returns late is
// closed.
func (h *Host) run(e *entry) {
	ctx, cancel := context.WithTimeout(h.ctx, h.opts.StartTimeout)
	defer cancel()
	type started struct {
		svc plugins.Service
		err error
	}
	res := make(chan started, 1)
	go func() {
		svc, err := e.p.Start(ctx, h.opts.Env)
		res <- started{svc, err}
	}()
	var r started
	select {
	case r = <-res:
	case <-ctx.Done():
		r.err = fmt.Errorf("start %s: not serving after %v: %w", e.p.Name(), h.opts.StartTimeout, ctx.Err())
		if h.ctx.Err() != nil {
			r.err = fmt.Errorf("start %s: %w", e.p.Name(), errClosed)
		}
		go func() {
			if late := <-res; late.svc != nil {
				late.svc.Close()
			}
		}()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case r.err == nil && r.svc == nil:
		r.err = fmt.Errorf("start %s: no service", e.p.Name())
		fallthrough
	case r.err != nil:
		e.state, e.err = api.PluginFailed, r.err
		if errors.Is(r.err, plugins.ErrUnavailable) {
			e.state = api.PluginUnavailable
		}
	case h.ctx.Err() != nil:
		r.svc.Close() // the host closed while it started
		e.state, e.err = api.PluginStopped, fmt.Errorf("start %s: %w", e.p.Name(), errClosed)
	default:
		e.state, e.svc = api.PluginRunning, r.svc
	}
	close(e.done)
}

// service returns e's running service, starting it first if needed and
// waiting for it until ctx is done.
func (h *Host) service(ctx context.Context, e *entry) (plugins.Service, error) {
	select {
	case <-h.start(e):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.svc, e.err
}

// States reports each plugin's state, in the order enabled.
func (h *Host) States() []api.PluginState {
	out := make([]api.PluginState, 0, len(h.entries))
	for _, e := range h.entries {
		e.mu.Lock()
		st := api.PluginState{Name: e.p.Name(), State: e.state}
		if e.err != nil {
			st.Error = e.err.Error()
		}
		svc := e.svc
		e.mu.Unlock()
		if l, ok := e.p.(plugins.Listener); ok {
			st.Port, _ = l.Port(h.opts.Env.Environ)
		}
		if ps, ok := svc.(plugins.Processes); ok {
			st.RSS = new(int64)
			for _, pid := range ps.PIDs() {
				if n, err := proc.RSS(pid); err == nil {
					*st.RSS += n
				}
			}
		}
		out = append(out, st)
	}
	return out
}

// Claims reports whether an enabled plugin executes the action type.
func (h *Host) Claims(action string) bool {
	_, ok := h.byAction[action]
	return ok
}

// Execute runs an action of a type a plugin claims, once its service
// serves (starting it on first use). An error wraps plugins.ErrUnavailable
// when the plugin cannot run here, ctx's error when the caller went away.
func (h *Host) Execute(ctx context.Context, a *api.Action) (*api.Observation, error) {
	e, ok := h.byAction[a.Action]
	if !ok {
		return nil, fmt.Errorf("action %q: no plugin executes it", a.Action)
	}
	svc, err := h.service(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", e.p.Name(), err)
	}
	obs, err := svc.Execute(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %s: %w", e.p.Name(), a.Action, err)
	}
	return obs, nil
}

// ConnectionToken returns the connection token of the named plugin, once
// its service runs and has one: asking for it is a first use, which starts
// the plugin (and waits for it until ctx is done), as OpenHands' client
// asks for VS Code's when its user opens it. false: the plugin is not
// enabled, cannot run, or has no token.
func (h *Host) ConnectionToken(ctx context.Context, name string) (string, bool) {
	i := slices.IndexFunc(h.entries, func(e *entry) bool { return e.p.Name() == name })
	if i < 0 {
		return "", false
	}
	svc, err := h.service(ctx, h.entries[i])
	if t, ok := svc.(plugins.Tokener); ok && err == nil {
		return t.ConnectionToken(), true
	}
	return "", false
}

// Routes lists one route per plugin: every method under /plugins/NAME/,
// answered by the plugin's handler (started on first use) with the prefix
// stripped; and the native API's routes of each plugin that is a
// plugins.Router, answered by the same handler.
func (h *Host) Routes() []httpapi.Route {
	var out []httpapi.Route
	for _, e := range h.entries {
		prefix := "/plugins/" + e.p.Name()
		out = append(out, httpapi.Route{Path: prefix + "/", Summary: "plugin " + e.p.Name() + ": its own routes", Handler: h.serve(e, prefix)})
		if rt, ok := e.p.(plugins.Router); ok {
			for _, r := range rt.Routes() {
				out = append(out, httpapi.Route{Method: r.Method, Path: r.Path, Summary: r.Summary, Handler: h.serve(e, "")})
			}
		}
	}
	return out
}

// serve answers a request with e's handler, prefix stripped, once e's
// service runs (starting it on first use).
func (h *Host) serve(e *entry, prefix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		svc, err := h.service(r.Context(), e)
		switch {
		case errors.Is(err, plugins.ErrUnavailable):
			httpapi.Error(w, httpapi.WithStatus(http.StatusNotImplemented, api.CodeUnsupported, fmt.Errorf("plugin %s: %w", e.p.Name(), err)))
			return
		case err != nil:
			httpapi.Error(w, fmt.Errorf("plugin %s: %w", e.p.Name(), err))
			return
		}
		handler := svc.Handler()
		if handler == nil {
			httpapi.WriteError(w, http.StatusNotFound, api.CodeNotFound, "plugin "+e.p.Name()+" serves no routes")
			return
		}
		if prefix != "" {
			handler = http.StripPrefix(prefix, handler)
		}
		handler.ServeHTTP(w, r)
	}
}

// Close ends the starts under way and closes the running services.
func (h *Host) Close() error {
	h.cancel()
	var errs []error
	for _, e := range h.entries {
		e.mu.Lock()
		svc := e.svc
		e.svc = nil
		if svc != nil {
			e.state, e.err = api.PluginStopped, errClosed
		}
		e.mu.Unlock()
		if svc != nil {
			if err := svc.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close plugin %s: %w", e.p.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}
