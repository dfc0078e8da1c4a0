package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/bothy-sandbox/bothy/internal/names"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// Forks and snapshots of runtimes: bothy's own routes beside OpenHands'
// runtime API (docs/serve.md, docs/snapshots.md).

// MaxForkChildren is the most children one POST /fork starts.
const MaxForkChildren = 64

// ForkRequest is POST /fork's body.
type ForkRequest struct {
	RuntimeID string `json:"runtime_id"`
	// N is how many children (default 1, at most MaxForkChildren).
	N int `json:"n"`
	// SessionIDs are the children's sessions, one each; default
	// PARENT_SESSION-fork-RANDOM-I.
	SessionIDs []string `json:"session_ids,omitempty"`
	// Volumes is "refuse" (default) or "share": the parent's bind mounts
	// and named volumes (overlay volumes fork as the root filesystem).
	Volumes string `json:"volumes,omitempty"`
}

// ForkResponse is POST /fork's answer.
type ForkResponse struct {
	SnapshotID string `json:"snapshot_id"`
	// Runtime is the parent, started again on the snapshot.
	Runtime Runtime `json:"runtime"`
	// Runtimes are the children, in order.
	Runtimes []Runtime `json:"runtimes"`
}

// SnapshotRequest is POST /snapshot's body.
type SnapshotRequest struct {
	RuntimeID string `json:"runtime_id"`
	Name      string `json:"name"`
}

// SnapshotInfo describes a snapshot (no host paths).
type SnapshotInfo struct {
	SnapshotID string `json:"snapshot_id"`
	Name       string `json:"name,omitempty"` // "": a fork's
	Image      string `json:"image"`
	Parent     string `json:"parent,omitempty"`
	Depth      int    `json:"depth"`
	Created    string `json:"created"`
	// Sandboxes and Snapshots count what is on it (it cannot be removed
	// while either is not 0).
	Sandboxes int  `json:"sandboxes"`
	Snapshots int  `json:"snapshots"`
	Complete  bool `json:"complete"`
}

// SnapshotResponse is POST /snapshot's answer.
type SnapshotResponse struct {
	Snapshot SnapshotInfo `json:"snapshot"`
	// Runtime is the sandbox, started again on the snapshot.
	Runtime Runtime `json:"runtime"`
}

func snapshotInfo(s *sandbox.Snapshot) SnapshotInfo {
	return SnapshotInfo{
		SnapshotID: s.ID, Name: s.Name, Image: s.Image, Parent: s.Parent, Depth: s.Depth,
		Created: s.Created.UTC().Format(time.RFC3339Nano), Sandboxes: len(s.Users), Snapshots: len(s.Children),
		Complete: s.Complete,
	}
}

// snapshotStatus is the HTTP status of a fork's or snapshot's error.
func snapshotStatus(err error) int {
	switch {
	case errors.Is(err, sandbox.ErrSnapshotNotFound), errors.Is(err, sandbox.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, sandbox.ErrSnapshotInUse), errors.Is(err, sandbox.ErrSnapshotDepth),
		errors.Is(err, sandbox.ErrForkVolumes), errors.Is(err, sandbox.ErrNotStartable), errors.Is(err, sandbox.ErrNameInUse):
		return http.StatusConflict
	case errors.Is(err, sandbox.ErrLimits):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// target reads a runtime ID of a fork or snapshot.
func (s *Server) snapshotTarget(w http.ResponseWriter, r *http.Request, id string) *sandbox.Sandbox {
	sb, err := s.byRuntime(r.Context(), id)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return nil
	}
	if sb == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("runtime %q not found", id))
		return nil
	}
	return sb
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	var req ForkRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.N == 0 {
		req.N = max(1, len(req.SessionIDs))
	}
	switch {
	case req.N < 0 || req.N > MaxForkChildren:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("n %d out of range (1 to %d)", req.N, MaxForkChildren))
		return
	case req.SessionIDs != nil && len(req.SessionIDs) != req.N:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%d session_ids for n %d", len(req.SessionIDs), req.N))
		return
	case req.Volumes != "" && req.Volumes != sandbox.ForkVolumesRefuse && req.Volumes != sandbox.ForkVolumesShare:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid volumes %q: share or refuse", req.Volumes))
		return
	}
	ctx := r.Context()
	parent := s.snapshotTarget(w, r, req.RuntimeID)
	if parent == nil {
		return
	}
	sessions := req.SessionIDs
	if sessions == nil {
		var b [4]byte
		_, _ = rand.Read(b[:])
		base := parent.Labels[LabelSession]
		for i := range req.N {
			sessions = append(sessions, fmt.Sprintf("%s-fork-%s-%d", base, hex.EncodeToString(b[:]), i+1))
		}
	}
	seen := map[string]bool{}
	for _, id := range sessions {
		if err := (&StartRequest{SessionID: id}).validate(); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if seen[id] {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("session_id %q given twice", id))
			return
		}
		seen[id] = true
		if sb, err := s.bySession(ctx, id); err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		} else if sb != nil {
			writeError(w, http.StatusConflict, fmt.Sprintf("session %q has a runtime already (%s)", id, sb.ID))
			return
		}
	}
	started := time.Now()
	// As /start: the fork outlives the request.
	snap, children, err := s.opts.Manager.Fork(context.WithoutCancel(ctx), parent.ID, sandbox.ForkOptions{
		N: req.N, Volumes: req.Volumes,
		Each: func(i int, o *sandbox.CreateOptions) { s.forkChild(sessions[i], o) },
	})
	s.proxy.forget(parent.ID)
	if err != nil {
		// The children that did start are removed: the client learns of
		// none of them.
		for _, c := range children {
			_ = s.opts.Manager.Remove(context.WithoutCancel(ctx), c.ID, true)
		}
		s.opts.Log.Error("fork", "runtime", parent.ID, "err", err)
		writeError(w, snapshotStatus(err), err.Error())
		return
	}
	s.compact(snap)
	resp := ForkResponse{SnapshotID: snap.ID, Runtimes: []Runtime{}}
	if p, err := s.opts.Manager.Get(ctx, parent.ID); err == nil {
		resp.Runtime = s.runtime(r, p)
	}
	for _, c := range children {
		resp.Runtimes = append(resp.Runtimes, s.runtime(r, c))
	}
	s.opts.Log.Info("forked", "runtime", parent.ID, "children", len(children), "took", time.Since(started).Round(time.Millisecond))
	writeJSON(w, http.StatusCreated, resp)
}

// forkChild gives a fork's child its session: its label and, when the
// session ID can be one, its name; an agent server's child gets a key of
// its own under the names the agent reads it by.
func (s *Server) forkChild(session string, o *sandbox.CreateOptions) {
	o.Labels[LabelSession] = session
	o.Name = ""
	if nameOK(session) {
		o.Name = session
	}
	if o.Labels[LabelPort] == "" {
		return
	}
	o.APIKey = newKey()
	env := o.Env[:0]
	for _, kv := range o.Env {
		if !strings.HasPrefix(kv, "OH_SESSION_API_KEYS_0=") && !strings.HasPrefix(kv, "SESSION_API_KEY=") {
			env = append(env, kv)
		}
	}
	o.Env = append(env, "OH_SESSION_API_KEYS_0="+o.APIKey, "SESSION_API_KEY="+o.APIKey)
}

func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	var req SnapshotRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !names.Valid(req.Name) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid snapshot name %q: 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit", req.Name))
		return
	}
	sb := s.snapshotTarget(w, r, req.RuntimeID)
	if sb == nil {
		return
	}
	ctx := r.Context()
	snap, err := s.opts.Manager.TakeSnapshot(context.WithoutCancel(ctx), sb.ID, sandbox.SnapshotOptions{Name: req.Name})
	s.proxy.forget(sb.ID)
	if err != nil {
		status := snapshotStatus(err)
		if strings.Contains(err.Error(), "is in use") {
			status = http.StatusConflict
		}
		writeError(w, status, err.Error())
		return
	}
	s.compact(snap)
	resp := SnapshotResponse{Snapshot: snapshotInfo(snap)}
	if p, err := s.opts.Manager.Get(ctx, sb.ID); err == nil {
		resp.Runtime = s.runtime(r, p)
	}
	s.opts.Log.Info("snapshot", "runtime", sb.ID, "snapshot", snap.ID, "name", snap.Name)
	writeJSON(w, http.StatusCreated, resp)
}

func (s *Server) handleSnapshots(w http.ResponseWriter, r *http.Request) {
	all, err := s.opts.Manager.ListSnapshots(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := []SnapshotInfo{}
	for _, snap := range all {
		out = append(out, snapshotInfo(snap))
	}
	writeJSON(w, http.StatusOK, map[string]any{"snapshots": out})
}

func (s *Server) handleSnapshotRemove(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("name")
	snap, err := s.opts.Manager.GetSnapshot(r.Context(), ref)
	if err == nil {
		err = s.opts.Manager.RemoveSnapshot(r.Context(), ref)
	}
	if err != nil {
		writeError(w, snapshotStatus(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"snapshot_id": snap.ID, "status": "removed"})
}

// compact hands a snapshot that wants compacting to Options.Compact.
func (s *Server) compact(snap *sandbox.Snapshot) {
	if s.opts.Compact != nil && snap.WantsCompaction() {
		s.opts.Compact(snap)
	}
}
