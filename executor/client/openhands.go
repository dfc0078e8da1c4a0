package client

import (
	"context"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// ExecuteAction sends an OpenHands action to POST /execute_action and
// returns its observation.
func (c *Client) ExecuteAction(ctx context.Context, a *api.Action) (*api.Observation, error) {
	var obs api.Observation
	if err := c.call(ctx, "POST", "/execute_action", &api.ExecuteActionRequest{Action: a}, &obs); err != nil {
		return nil, err
	}
	return &obs, nil
}

// ServerInfo returns OpenHands' GET /server_info (it takes 100 ms: the CPU
// use is measured over that).
func (c *Client) ServerInfo(ctx context.Context) (*api.ServerInfo, error) {
	var info api.ServerInfo
	if err := c.call(ctx, "GET", "/server_info", nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}
