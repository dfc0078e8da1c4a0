package executor

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

// Plugin serves OpenHands action types the core does not execute
// (run_ipython: Jupyter; browse and browse_interactive: a browser). A
// plugin may take a while to start: GET /alive lists it as starting until
// Ready is closed, and its actions wait for that.
type Plugin interface {
	// Name names the plugin ("jupyter", "browser", "vscode").
	Name() string
	// Actions lists the OpenHands action types it executes; two plugins
	// cannot claim the same one, nor a core action.
	Actions() []string
	// Ready is closed once the plugin can serve (nil: ready at once).
	Ready() <-chan struct{}
	// Execute runs one action of a type in Actions and answers its
	// observation; an error is an internal failure (500).
	Execute(ctx context.Context, a *api.Action) (*api.Observation, error)
}

// TokenPlugin is a Plugin that has a connection token, served by
// GET /vscode/connection_token when the plugin is named "vscode".
type TokenPlugin interface {
	Plugin
	ConnectionToken() string
}

// coreActions are executed by the server itself.
var coreActions = []string{api.ActionRun, api.ActionRead, api.ActionWrite, api.ActionEdit}

// pluginTable indexes plugins by the action types they claim.
func pluginTable(plugins []Plugin) (map[string]Plugin, error) {
	t := map[string]Plugin{}
	for _, p := range plugins {
		for _, a := range p.Actions() {
			if slices.Contains(coreActions, a) {
				return nil, fmt.Errorf("plugin %s: action %q is executed by the executor itself", p.Name(), a)
			}
			if q, ok := t[a]; ok {
				return nil, fmt.Errorf("plugin %s: action %q is claimed by plugin %s", p.Name(), a, q.Name())
			}
			t[a] = p
		}
	}
	return t, nil
}

// States reports the state of each plugin.
func (s *Server) States() []api.PluginState {
	var out []api.PluginState
	for _, p := range s.opts.Plugins {
		st := api.PluginState{Name: p.Name(), State: api.PluginRunning}
		if !isReady(p) {
			st.State = api.PluginStarting
		}
		out = append(out, st)
	}
	return out
}

func isReady(p Plugin) bool {
	ch := p.Ready()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// unavailableObservation is what OpenHands answers for an action whose
// plugin is absent (for run_ipython OpenHands fails with this text in a
// 500; here it is an observation the agent can read).
func unavailableObservation(action string) *api.Observation {
	switch action {
	case api.ActionRunIPython:
		return api.ErrorObservationOf("JupyterRequirement not found. Unable to run IPython action.")
	case api.ActionBrowse, api.ActionBrowseInteractive:
		return api.ErrorObservationOf("Browser functionality is not supported or disabled.")
	}
	return api.ErrorObservationOf(fmt.Sprintf("Action %s is not supported in the current runtime.", action))
}

// pluginActions are the action types that only a plugin executes.
var pluginActions = []string{api.ActionRunIPython, api.ActionBrowse, api.ActionBrowseInteractive}

// executePlugin runs a plugin's action once it is ready.
func (s *Server) executePlugin(w http.ResponseWriter, r *http.Request, p Plugin, a *api.Action) {
	if ch := p.Ready(); ch != nil {
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
	}
	obs, err := p.Execute(r.Context(), a)
	if err != nil {
		httpapi.Error(w, fmt.Errorf("plugin %s: %s: %w", p.Name(), a.Action, err))
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, obs)
}

func (s *Server) handleVSCodeToken(w http.ResponseWriter, r *http.Request) {
	var tok api.VSCodeToken
	for _, p := range s.opts.Plugins {
		if tp, ok := p.(TokenPlugin); ok && p.Name() == "vscode" && isReady(p) {
			t := tp.ConnectionToken()
			tok.Token = &t
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, &tok)
}
