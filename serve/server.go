package serve

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bothy-sandbox/bothy/internal/names"
	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// Ports OpenHands gives its services inside a sandbox.
const (
	DefaultAgentPort  = 60000 // the agent server (V1)
	DefaultVSCodePort = 60001 // VS Code (V1)
	DefaultWorker1    = 12000 // WORKER_1: the agent's first web app
	DefaultWorker2    = 12001 // WORKER_2
)

// Manager is what serve needs of sandbox.Manager.
type Manager interface {
	Create(ctx context.Context, opts sandbox.CreateOptions) (*sandbox.Sandbox, error)
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	List(ctx context.Context) ([]*sandbox.Sandbox, error)
	Remove(ctx context.Context, ref string, force bool) error
	Pause(ctx context.Context, ref string) error
	Resume(ctx context.Context, ref string) error
	Paused(sb *sandbox.Sandbox) (bool, error)
	Image(ctx context.Context, ref string) (*oci.Image, error)
	GetPool(ctx context.Context, name string) (*sandbox.Pool, error)
	Claim(ctx context.Context, opts sandbox.ClaimOptions) (*sandbox.Sandbox, sandbox.Claimed, error)
	Fork(ctx context.Context, ref string, o sandbox.ForkOptions) (*sandbox.Snapshot, []*sandbox.Sandbox, error)
	TakeSnapshot(ctx context.Context, ref string, o sandbox.SnapshotOptions) (*sandbox.Snapshot, error)
	ListSnapshots(ctx context.Context) ([]*sandbox.Snapshot, error)
	GetSnapshot(ctx context.Context, ref string) (*sandbox.Snapshot, error)
	RemoveSnapshot(ctx context.Context, ref string) error
}

var _ Manager = (*sandbox.Manager)(nil)

// Options configure a Server.
type Options struct {
	Manager Manager
	// APIKey is required in X-API-Key on every runtime API route.
	APIKey string
	// BaseURL is the URL OpenHands reaches the server at; runtime URLs are
	// BaseURL/{runtime_id}. Empty: http:// and the request's Host.
	BaseURL string
	// MemoryPerFactor and CPUsPerFactor are the limits of a runtime per
	// unit of resource_factor (0: no limit).
	MemoryPerFactor int64
	CPUsPerFactor   float64
	// Network is the sandboxes' network mode (default none: the proxy
	// needs none).
	Network string
	// RegistryPrefix is what GET /registry_prefix answers.
	RegistryPrefix string
	// VSCodePort and WorkPorts are the ports inside the sandbox that
	// /{id}/vscode/, /{id}/work-1/ and /{id}/work-2/ reach.
	VSCodePort int
	WorkPorts  [2]int
	// Pools are pools (bothy pool create) a /start claims its sandbox from
	// when one's sandboxes are what the request asks for (image, network
	// and limits; V0 runtimes only: a pool's sandboxes run nothing but
	// their executor); Refill, when set, is called after each claim (bothy
	// serve starts the pool's filler).
	Pools  []string
	Refill func(pool string)
	// Compact, when set, is called with each snapshot a fork or a
	// snapshot made that wants compacting (Snapshot.WantsCompaction):
	// bothy serve starts bothy snapshot compact in the background.
	Compact func(*sandbox.Snapshot)
	Log     *slog.Logger
}

// Server answers the runtime API and proxies runtime URLs to sandboxes.
type Server struct {
	opts  Options
	key   [sha256.Size]byte
	proxy *proxy
}

// New returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Manager == nil {
		return nil, errors.New("serve: no sandbox manager")
	}
	if opts.APIKey == "" {
		return nil, errors.New("serve: an API key is required")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.VSCodePort == 0 {
		opts.VSCodePort = DefaultVSCodePort
	}
	if opts.WorkPorts == [2]int{} {
		opts.WorkPorts = [2]int{DefaultWorker1, DefaultWorker2}
	}
	if opts.RegistryPrefix == "" {
		opts.RegistryPrefix = "localhost/bothy"
	}
	s := &Server{opts: opts, key: sha256.Sum256([]byte(opts.APIKey))}
	s.proxy = newProxy(opts.Manager, opts.Log)
	return s, nil
}

// Close releases the proxy's idle connections.
func (s *Server) Close() { s.proxy.close() }

// ServeHTTP routes /{runtime_id}/... to the proxy and the rest to the
// runtime API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	first, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if names.ID(first) {
		s.proxy.serve(w, r, first, "/"+rest, s.opts)
		return
	}
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong X-API-Key")
		return
	}
	s.api().ServeHTTP(w, r)
}

func (s *Server) authorized(r *http.Request) bool {
	got := sha256.Sum256([]byte(r.Header.Get("X-API-Key")))
	return subtle.ConstantTimeCompare(got[:], s.key[:]) == 1
}

// api is the runtime API's router.
func (s *Server) api() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /start", s.handleStart)
	mux.HandleFunc("POST /stop", s.handleStop)
	mux.HandleFunc("POST /pause", s.handlePause)
	mux.HandleFunc("POST /resume", s.handleResume)
	mux.HandleFunc("GET /sessions/batch", s.handleBatch)
	mux.HandleFunc("GET /sessions/{session_id}", s.handleSession)
	mux.HandleFunc("GET /runtime/{runtime_id}", s.handleRuntime)
	mux.HandleFunc("GET /list", s.handleList)
	mux.HandleFunc("GET /registry_prefix", s.handleRegistryPrefix)
	mux.HandleFunc("GET /image_exists", s.handleImageExists)
	mux.HandleFunc("POST /fork", s.handleFork)
	mux.HandleFunc("POST /snapshot", s.handleSnapshot)
	mux.HandleFunc("GET /snapshots", s.handleSnapshots)
	mux.HandleFunc("DELETE /snapshots/{name}", s.handleSnapshotRemove)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})
	return mux
}

// writeError answers the JSON error body OpenHands reports ("detail").
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"detail": msg, "error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads a JSON body of at most 1 MiB.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON body: %w", err)
	}
	return nil
}

// baseURL is the URL the client reached the server at.
func (s *Server) baseURL(r *http.Request) string {
	if s.opts.BaseURL != "" {
		return strings.TrimSuffix(s.opts.BaseURL, "/")
	}
	return "http://" + r.Host
}

// runtime describes sb as the runtime API does.
func (s *Server) runtime(r *http.Request, sb *sandbox.Sandbox) Runtime {
	base := s.baseURL(r) + "/" + sb.ID
	rt := Runtime{
		RuntimeID: sb.ID, SessionID: sb.Labels[LabelSession], URL: base, SessionAPIKey: sb.APIKey,
		Image: sb.Image, RestartReasons: []string{}, Created: sb.Created.UTC().Format(time.RFC3339Nano),
		WorkHosts: map[string]int{base + "/work-1": s.opts.WorkPorts[0], base + "/work-2": s.opts.WorkPorts[1]},
	}
	switch sb.Status {
	case sandbox.StatusRunning:
		rt.Status, rt.PodStatus = StatusRunning, PodReady
		if paused, err := s.opts.Manager.Paused(sb); err != nil {
			rt.Status, rt.PodStatus, rt.Error = StatusError, PodFailed, err.Error()
		} else if paused {
			rt.Status, rt.PodStatus = StatusPaused, PodPending
		}
	case sandbox.StatusCreating:
		rt.Status, rt.PodStatus = "starting", PodPending
	case sandbox.StatusExited:
		rt.Status, rt.PodStatus = StatusStopped, PodFailed
	default:
		rt.Status, rt.PodStatus = StatusError, PodFailed
	}
	return rt
}

// served lists the sandboxes that serve a session.
func (s *Server) served(ctx context.Context) ([]*sandbox.Sandbox, error) {
	all, err := s.opts.Manager.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []*sandbox.Sandbox
	for _, sb := range all {
		if sb.Labels[LabelSession] != "" {
			out = append(out, sb)
		}
	}
	return out, nil
}

// bySession finds the sandbox of a session (the newest, if a crash left
// several), or nil.
func (s *Server) bySession(ctx context.Context, session string) (*sandbox.Sandbox, error) {
	list, err := s.served(ctx)
	if err != nil {
		return nil, err
	}
	for _, sb := range list {
		if sb.Labels[LabelSession] == session {
			return sb, nil
		}
	}
	return nil, nil
}

// byRuntime finds a runtime's sandbox by its full ID, or nil.
func (s *Server) byRuntime(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	if !names.ID(id) {
		return nil, nil
	}
	sb, err := s.opts.Manager.Get(ctx, id)
	if errors.Is(err, sandbox.ErrNotFound) || (err == nil && (sb.ID != id || sb.Labels[LabelSession] == "")) {
		return nil, nil
	}
	return sb, err
}

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := req.validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx := r.Context()
	if sb, err := s.bySession(ctx, req.SessionID); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	} else if sb != nil {
		if sb.Status == sandbox.StatusRunning {
			writeJSON(w, http.StatusOK, s.runtime(r, sb))
			return
		}
		// A stopped runtime of the session: start it afresh.
		if err := s.opts.Manager.Remove(context.WithoutCancel(ctx), sb.ID, true); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	opts, err := s.createOptions(&req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	started := time.Now()
	// The sandbox outlives the request: a client that gives up does not
	// leave a half-made sandbox behind.
	sb, err := s.create(context.WithoutCancel(ctx), opts)
	if errors.Is(err, sandbox.ErrNameInUse) {
		// Another /start of the session won the name: answer its runtime.
		// A sandbox of bothy's own with that name: start without a name.
		existing, lerr := s.bySession(ctx, req.SessionID)
		switch {
		case lerr != nil:
			err = lerr
		case existing != nil:
			writeJSON(w, http.StatusOK, s.runtime(r, existing))
			return
		default:
			opts.Name = ""
			sb, err = s.opts.Manager.Create(context.WithoutCancel(ctx), opts)
		}
	}
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, oci.ErrNotFound) || errors.Is(err, sandbox.ErrLimits) || errors.Is(err, sandbox.ErrSnapshotNotFound) {
			status = http.StatusBadRequest
		}
		s.opts.Log.Error("start", "session", req.SessionID, "image", req.Image, "err", err)
		writeError(w, status, err.Error())
		return
	}
	s.opts.Log.Info("started", "session", req.SessionID, "runtime", sb.ID, "image", sb.Image, "took", time.Since(started).Round(time.Millisecond))
	writeJSON(w, http.StatusCreated, s.runtime(r, sb))
}

// create claims a sandbox for opts from the first of the server's pools
// that has one ready and made the same way, and creates one otherwise.
func (s *Server) create(ctx context.Context, opts sandbox.CreateOptions) (*sandbox.Sandbox, error) {
	if len(opts.Cmd) > 0 || opts.FromSnapshot != "" {
		return s.opts.Manager.Create(ctx, opts)
	}
	for _, name := range s.opts.Pools {
		p, err := s.opts.Manager.GetPool(ctx, name)
		if err != nil {
			s.opts.Log.Warn("pool", "pool", name, "err", err)
			continue
		}
		if !poolFits(p.Template, opts) {
			s.opts.Log.Debug("pool does not fit", "pool", name, "image", p.Template.Image, "network", p.Template.Network.Mode,
				"memory", p.Template.Limits.Memory, "cpus", p.Template.Limits.CPUs)
			continue
		}
		sb, _, err := s.opts.Manager.Claim(ctx, sandbox.ClaimOptions{
			Pool: name, Name: opts.Name, Env: opts.Env, Workdir: opts.Workdir, Labels: opts.Labels,
			APIKey: opts.APIKey, NoColdStart: true,
		})
		if errors.Is(err, sandbox.ErrPoolEmpty) {
			continue
		}
		if err == nil && s.opts.Refill != nil {
			s.opts.Refill(name)
		}
		return sb, err
	}
	return s.opts.Manager.Create(ctx, opts)
}

// poolFits: a sandbox of a pool made from template is what a /start's
// opts ask for (image, network, limits), once claimed with opts' name,
// environment, working directory, labels and key.
func poolFits(template, opts sandbox.CreateOptions) bool {
	return template.Image == opts.Image && template.Network.Mode == opts.Network.Mode &&
		template.Limits.Memory == opts.Limits.Memory && template.Limits.CPUs == opts.Limits.CPUs
}

// createOptions maps a /start request onto a sandbox: docs/serve.md.
func (s *Server) createOptions(req *StartRequest) (sandbox.CreateOptions, error) {
	opts := sandbox.CreateOptions{
		Image:  req.Image,
		Labels: map[string]string{LabelSession: req.SessionID},
	}
	opts.Network.Mode = s.opts.Network
	if req.Snapshot != "" {
		// The snapshot's image, with its layers (the request's image is
		// the one OpenHands would have run: not used).
		opts.FromSnapshot, opts.Image = req.Snapshot, ""
	}
	if nameOK(req.SessionID) {
		// The name makes two /start of one session race for one sandbox.
		opts.Name = req.SessionID
	}
	for k, v := range req.Environment {
		opts.Env = append(opts.Env, k+"="+v)
	}
	if f := req.ResourceFactor; f > 0 || s.opts.MemoryPerFactor > 0 || s.opts.CPUsPerFactor > 0 {
		if f == 0 {
			f = 1
		}
		opts.Limits.Memory = int64(f * float64(s.opts.MemoryPerFactor))
		opts.Limits.CPUs = f * s.opts.CPUsPerFactor
	}
	switch {
	case req.Command.IsEmpty() || req.Command.actionServer():
		// V0: the executor is the action execution server. Its
		// --working-dir is the agent's workspace.
		opts.Workdir = req.Command.flag("working-dir")
		// Its --plugins: bothy's own, each started on first use where
		// the image has it (bothy build --plugins).
		opts.OptionalPlugins = req.Command.plugins()
		// VS Code listens where URL/vscode/ leads, unless the request
		// says where (OpenHands' VSCODE_PORT).
		if _, set := req.Environment["VSCODE_PORT"]; !set && slices.Contains(opts.OptionalPlugins, "vscode") {
			opts.Env = append(opts.Env, "VSCODE_PORT="+strconv.Itoa(s.opts.VSCodePort))
		}
	default:
		port, err := req.agentPort()
		if err != nil {
			return opts, err
		}
		opts.Cmd = req.Command.argv()
		opts.Workdir = req.WorkingDir
		opts.Labels[LabelPort] = strconv.Itoa(port)
		// The agent server checks the session key itself: the sandbox's
		// executor key, made here, under both names it reads.
		opts.APIKey = newKey()
		opts.Env = append(opts.Env, "OH_SESSION_API_KEYS_0="+opts.APIKey, "SESSION_API_KEY="+opts.APIKey)
	}
	if opts.Workdir != "" && !strings.HasPrefix(opts.Workdir, "/") {
		return opts, fmt.Errorf("working directory %q must be absolute", opts.Workdir)
	}
	if len(opts.Workdir) > 1 {
		opts.Workdir = strings.TrimSuffix(opts.Workdir, "/")
	}
	return opts, nil
}

// newKey returns 32 random bytes in hex, as bothy's own session keys.
func newKey() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// nameOK: a sandbox name that cannot be taken for a runtime ID.
func nameOK(s string) bool { return names.Valid(s) && !names.ID(s) }

// runtimeRequest is the body of /stop, /pause and /resume.
type runtimeRequest struct {
	RuntimeID string `json:"runtime_id"`
}

// target reads the runtime of a /stop, /pause or /resume, answering the
// error itself when it returns nil.
func (s *Server) target(w http.ResponseWriter, r *http.Request) *sandbox.Sandbox {
	var req runtimeRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil
	}
	sb, err := s.byRuntime(r.Context(), req.RuntimeID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return nil
	}
	if sb == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("runtime %q not found", req.RuntimeID))
		return nil
	}
	return sb
}

func (s *Server) handleStop(w http.ResponseWriter, r *http.Request) {
	sb := s.target(w, r)
	if sb == nil {
		return
	}
	ctx := context.WithoutCancel(r.Context())
	// A frozen sandbox is thawed so that its processes can die.
	_ = s.opts.Manager.Resume(ctx, sb.ID)
	if err := s.opts.Manager.Remove(ctx, sb.ID, true); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.proxy.forget(sb.ID)
	s.opts.Log.Info("stopped", "session", sb.Labels[LabelSession], "runtime", sb.ID)
	writeJSON(w, http.StatusOK, map[string]string{"runtime_id": sb.ID, "status": StatusStopped})
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	sb := s.target(w, r)
	if sb == nil {
		return
	}
	if err := s.opts.Manager.Pause(r.Context(), sb.ID); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, sandbox.ErrNoFreezer) {
			status = http.StatusNotImplemented
		} else if sb.Status != sandbox.StatusRunning {
			status = http.StatusConflict
		}
		writeError(w, status, err.Error())
		return
	}
	s.opts.Log.Info("paused", "session", sb.Labels[LabelSession], "runtime", sb.ID)
	writeJSON(w, http.StatusOK, map[string]string{"runtime_id": sb.ID, "status": StatusPaused})
}

func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	sb := s.target(w, r)
	if sb == nil {
		return
	}
	if err := s.opts.Manager.Resume(r.Context(), sb.ID); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, sandbox.ErrNoFreezer) {
			status = http.StatusNotImplemented
		} else if sb.Status != sandbox.StatusRunning {
			status = http.StatusConflict
		}
		writeError(w, status, err.Error())
		return
	}
	s.opts.Log.Info("resumed", "session", sb.Labels[LabelSession], "runtime", sb.ID)
	sb, err := s.opts.Manager.Get(r.Context(), sb.ID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.runtime(r, sb))
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	sb, err := s.bySession(r.Context(), r.PathValue("session_id"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if sb == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("session %q not found", r.PathValue("session_id")))
		return
	}
	writeJSON(w, http.StatusOK, s.runtime(r, sb))
}

func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	want := map[string]bool{}
	for _, id := range r.URL.Query()["ids"] {
		want[id] = true
	}
	list, err := s.served(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := []Runtime{}
	seen := map[string]bool{}
	for _, sb := range list {
		if id := sb.Labels[LabelSession]; want[id] && !seen[id] {
			seen[id] = true
			out = append(out, s.runtime(r, sb))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleRuntime(w http.ResponseWriter, r *http.Request) {
	sb, err := s.byRuntime(r.Context(), r.PathValue("runtime_id"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if sb == nil {
		// OpenHands reads pod_status "not found" as not ready yet.
		writeJSON(w, http.StatusNotFound, map[string]string{"runtime_id": r.PathValue("runtime_id"), "pod_status": "not found", "detail": "runtime not found"})
		return
	}
	writeJSON(w, http.StatusOK, s.runtime(r, sb))
}

// handleList answers the runtimes that run or are paused (OpenHands'
// runtime API leaves stopped ones out).
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	list, err := s.served(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := []Runtime{}
	for _, sb := range list {
		if sb.Status == sandbox.StatusRunning {
			out = append(out, s.runtime(r, sb))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"runtimes": out})
}

func (s *Server) handleRegistryPrefix(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"registry_prefix": s.opts.RegistryPrefix})
}

// handleImageExists says whether the image is in bothy's store (nothing is
// pulled: `bothy pull` does that).
func (s *Server) handleImageExists(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("image")
	if ref == "" {
		writeError(w, http.StatusBadRequest, "image is required")
		return
	}
	_, err := s.opts.Manager.Image(r.Context(), ref)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]any{"exists": true, "image": ref})
	case errors.Is(err, oci.ErrNotFound):
		writeJSON(w, http.StatusOK, map[string]any{"exists": false, "image": ref})
	default:
		writeError(w, http.StatusBadRequest, err.Error())
	}
}
