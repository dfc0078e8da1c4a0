package client

import (
	"context"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// ExecuteAction sends an OpenHands action to POST /execute_action and
// returns its observation.
func (c *Client) ExecuteAction(ctx context.Context, a *api.Action) (*api.Observation, error) {
	return callFor[api.Observation](ctx, c, "POST", "/execute_action", &api.ExecuteActionRequest{Action: a})
}

// ServerInfo returns OpenHands' GET /server_info (it takes 100 ms: the CPU
// use is measured over that).
func (c *Client) ServerInfo(ctx context.Context) (*api.ServerInfo, error) {
	return callFor[api.ServerInfo](ctx, c, "GET", "/server_info", nil)
}

// VSCodeToken returns OpenHands' GET /vscode/connection_token: the VS Code
// plugin's token, which starts the plugin on first use ("": not enabled,
// or it cannot run).
func (c *Client) VSCodeToken(ctx context.Context) (string, error) {
	tok, err := callFor[api.VSCodeToken](ctx, c, "GET", "/vscode/connection_token", nil)
	if err != nil || tok.Token == nil {
		return "", err
	}
	return *tok.Token, nil
}
