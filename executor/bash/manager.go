package bash

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// DefaultName is the name of a session created without one.
const DefaultName = "default"

// Manager holds named sessions. It is safe for concurrent use.
type Manager struct {
	defaults Options

	mu       sync.Mutex
	sessions map[string]*Session
	creating map[string]chan struct{} // names being started
	closed   bool
}

// NewManager returns a Manager whose sessions start from defaults (every
// zero field of the Options given to Create is taken from it).
func NewManager(defaults Options) *Manager {
	return &Manager{
		defaults: defaults,
		sessions: map[string]*Session{},
		creating: map[string]chan struct{}{},
	}
}

func (m *Manager) merge(o Options) Options {
	d := m.defaults
	if o.Name == "" {
		o.Name = d.Name
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Shell == "" {
		o.Shell = d.Shell
	}
	if o.Cwd == "" {
		o.Cwd = d.Cwd
	}
	if o.Env == nil {
		o.Env = d.Env
	}
	if o.Username == "" {
		o.Username = d.Username
	}
	if o.Cred == nil && o.Username == "" {
		o.Cred = d.Cred
	}
	if o.NoChangeTimeout == 0 {
		o.NoChangeTimeout = d.NoChangeTimeout
	}
	if o.MaxOutput == 0 {
		o.MaxOutput = d.MaxOutput
	}
	if o.MaxBuffer == 0 {
		o.MaxBuffer = d.MaxBuffer
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = d.StartTimeout
	}
	if o.Reaper == nil {
		o.Reaper = d.Reaper
	}
	return o
}

// Create starts a session named opts.Name (DefaultName when empty). It
// fails with ErrExists when the name is taken.
func (m *Manager) Create(ctx context.Context, opts Options) (*Session, error) {
	opts = m.merge(opts)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := m.sessions[opts.Name]; ok {
		m.mu.Unlock()
		return nil, fmt.Errorf("create session %s: %w", opts.Name, ErrExists)
	}
	if _, ok := m.creating[opts.Name]; ok {
		m.mu.Unlock()
		return nil, fmt.Errorf("create session %s: %w", opts.Name, ErrExists)
	}
	ready := make(chan struct{})
	m.creating[opts.Name] = ready
	m.mu.Unlock()

	s, err := New(ctx, opts)

	m.mu.Lock()
	delete(m.creating, opts.Name)
	close(ready)
	if err == nil && m.closed {
		err = ErrClosed
	}
	if err == nil {
		m.sessions[opts.Name] = s
	}
	m.mu.Unlock()
	if err != nil {
		if s != nil {
			s.Close()
		}
		return nil, fmt.Errorf("create session %s: %w", opts.Name, err)
	}
	return s, nil
}

// Get returns the session called name.
func (m *Manager) Get(name string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[name]
	if !ok {
		return nil, fmt.Errorf("get session %s: %w", name, ErrNotFound)
	}
	return s, nil
}

// GetOrCreate returns the session called opts.Name, starting it when it
// does not exist (or its shell has exited: it is then replaced).
func (m *Manager) GetOrCreate(ctx context.Context, opts Options) (*Session, error) {
	name := m.merge(opts).Name
	for {
		m.mu.Lock()
		s, ok := m.sessions[name]
		ready, starting := m.creating[name]
		m.mu.Unlock()
		if ok {
			select {
			case <-s.Exited():
				m.remove(name, s)
				continue
			default:
				return s, nil
			}
		}
		if starting {
			select {
			case <-ready:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		s, err := m.Create(ctx, opts)
		if errors.Is(err, ErrExists) {
			continue
		}
		return s, err
	}
}

func (m *Manager) remove(name string, s *Session) {
	m.mu.Lock()
	if m.sessions[name] == s {
		delete(m.sessions, name)
	}
	m.mu.Unlock()
	s.Close()
}

// Delete closes the session called name and forgets it.
func (m *Manager) Delete(name string) error {
	m.mu.Lock()
	s, ok := m.sessions[name]
	delete(m.sessions, name)
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("delete session %s: %w", name, ErrNotFound)
	}
	return s.Close()
}

// List returns the names of the sessions, sorted.
func (m *Manager) List() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.sessions))
	for n := range m.sessions {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Close closes every session; Create fails afterwards.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	all := m.sessions
	m.sessions = map[string]*Session{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() { s.Close() })
	}
	wg.Wait()
	return nil
}
