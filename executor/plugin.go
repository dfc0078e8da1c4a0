package executor

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/plugins"
)

// coreActions are executed by the server itself.
var coreActions = []string{api.ActionRun, api.ActionRead, api.ActionWrite, api.ActionEdit}

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

// executePlugin runs an action a plugin claims, once the plugin runs; a
// plugin that cannot run here answers as an absent one.
func (s *Server) executePlugin(w http.ResponseWriter, r *http.Request, a *api.Action) {
	obs, err := s.plugins.Execute(r.Context(), a)
	switch {
	case errors.Is(err, plugins.ErrUnavailable):
		obs = unavailableObservation(a.Action)
	case r.Context().Err() != nil:
		return
	case err != nil:
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, obs)
}

func (s *Server) handleVSCodeToken(w http.ResponseWriter, r *http.Request) {
	var tok api.VSCodeToken
	if t, ok := s.plugins.ConnectionToken("vscode"); ok {
		tok.Token = &t
	}
	httpapi.WriteJSON(w, http.StatusOK, &tok)
}
