package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// ExecuteCell runs a cell in IPython kernel id (the Jupyter plugin;
// started on first use) and answers its outputs collected.
func (c *Client) ExecuteCell(ctx context.Context, id string, req api.KernelExecuteRequest) (*api.KernelExecution, error) {
	req.Stream = false
	return callFor[api.KernelExecution](ctx, c, "POST", "/v1/kernels/"+url.PathEscape(id)+"/execute", &req)
}

// StreamCell runs a cell in IPython kernel id, calling fn for each output
// as the kernel sends it, and answers how the cell ended.
func (c *Client) StreamCell(ctx context.Context, id string, req api.KernelExecuteRequest, fn func(*api.KernelEvent) error) (*api.KernelReply, error) {
	req.Stream = true
	hr, err := c.newRequest(ctx, "POST", "/v1/kernels/"+url.PathEscape(id)+"/execute", &req)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.KernelEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("read the outputs of kernel %s: %w", id, err)
		}
		if ev.Type == api.KernelEnd {
			if ev.Reply == nil {
				return nil, fmt.Errorf("read the outputs of kernel %s: an end without a reply", id)
			}
			return ev.Reply, nil
		}
		if err := fn(&ev); err != nil {
			return nil, err
		}
	}
}

// Kernels lists the running IPython kernels.
func (c *Client) Kernels(ctx context.Context) ([]api.Kernel, error) {
	var out []api.Kernel
	if err := c.call(ctx, "GET", "/v1/kernels", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// StopKernel stops IPython kernel id.
func (c *Client) StopKernel(ctx context.Context, id string) error {
	return c.call(ctx, "DELETE", "/v1/kernels/"+url.PathEscape(id), nil, nil)
}
