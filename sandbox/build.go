package sandbox

import (
	"context"
	"fmt"

	"github.com/bothy-sandbox/bothy/oci"
)

// What an image build (package runtimeimage) needs of the manager.

// Executor is the host path of the executor binary sandboxes get.
func (m *Manager) Executor() string { return m.opts.Executor }

// PluginServer is the bothy-plugin binary mounted in the sandboxes that
// enable a plugin; "" when there is none.
func (m *Manager) PluginServer() string { return m.opts.PluginServer }

// Init is the binary re-executed as launcher, remover and layer writer.
func (m *Manager) Init() string { return m.opts.Init }

// Image resolves ref in the store as Create does: "" is the embedded default
// image, imported on first use.
func (m *Manager) Image(ctx context.Context, ref string) (*oci.Image, error) {
	img, from, err := m.image(ctx, ref)
	if err == nil && from != nil {
		return nil, fmt.Errorf("image %s is in the shared store %s: an image build needs it in your own store: %w", ref, from.root, oci.ErrNotFound)
	}
	return img, err
}
