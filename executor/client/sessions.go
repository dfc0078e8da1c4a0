package client

import (
	"context"
	"net/url"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// CreateSession starts a bash session (name "default" when req.Name is
// empty); api.ErrConflict when the name is taken.
func (c *Client) CreateSession(ctx context.Context, req api.SessionCreateRequest) (*api.Session, error) {
	return callFor[api.Session](ctx, c, "POST", "/v1/sessions", &req)
}

// Sessions lists the bash sessions.
func (c *Client) Sessions(ctx context.Context) ([]api.Session, error) {
	var l api.SessionList
	if err := c.call(ctx, "GET", "/v1/sessions", nil, &l); err != nil {
		return nil, err
	}
	return l.Sessions, nil
}

// Session returns the state of session name.
func (c *Client) Session(ctx context.Context, name string) (*api.Session, error) {
	return callFor[api.Session](ctx, c, "GET", "/v1/sessions/"+url.PathEscape(name), nil)
}

// DeleteSession closes session name, killing its shell and jobs.
func (c *Client) DeleteSession(ctx context.Context, name string) error {
	return c.call(ctx, "DELETE", "/v1/sessions/"+url.PathEscape(name), nil, nil)
}

// RunSession serves one agent action on session name ("default" is
// created on first use): a command, a poll (empty command), input
// (IsInput) or a key ("C-c"). A command still running after the
// no-change or hard timeout is not an error: see Status.
func (c *Client) RunSession(ctx context.Context, name string, req api.SessionRunRequest) (*api.SessionResult, error) {
	return callFor[api.SessionResult](ctx, c, "POST", "/v1/sessions/"+url.PathEscape(name)+"/run", &req)
}
