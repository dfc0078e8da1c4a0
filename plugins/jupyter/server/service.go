package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/plugins"
)

// DefaultTimeout bounds a cell when the action or request sets none
// (OpenHands' default sandbox timeout).
const DefaultTimeout = 120 * time.Second

// StartTimeout bounds a kernel's start.
const StartTimeout = 2 * time.Minute

// maxKernels caps the kernels of a sandbox (each costs tens of MB).
const maxKernels = 8

// maxContent caps the text of a run_ipython observation.
const maxContent = 8 << 20

// Service is the plugin's running service: the kernels by id.
type Service struct {
	env    plugins.Env
	python string
	ctx    context.Context // ends kernel starts at Close
	cancel context.CancelFunc

	mu      sync.Mutex
	kernels map[string]*kernelSlot
	closed  bool
}

// kernelSlot is a kernel by id, and what run_ipython remembers of it.
type kernelSlot struct {
	ready chan struct{} // closed once started (or failed)
	k     *kernel
	err   error
	// cell holds the kernel for one cell at a time, and guards the rest.
	cell sync.Mutex
	// cwd is where the kernel was moved last, in generation cwdGen of the
	// kernel (OpenHands moves it when the bash session's cwd changes);
	// init maps each kernel_init_code run to the generation it ran in (a
	// restart loses both).
	cwd    string
	cwdGen int
	init   map[string]int
}

func newService(env plugins.Env, python string) *Service {
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{env: env, python: python, ctx: ctx, cancel: cancel, kernels: map[string]*kernelSlot{}}
}

// kernel returns kernel id, starting it first if needed.
func (s *Service) kernel(ctx context.Context, id string) (*kernelSlot, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("the Jupyter plugin is closed")
	}
	slot, ok := s.kernels[id]
	if !ok {
		if len(s.kernels) >= maxKernels {
			s.mu.Unlock()
			return nil, httpapi.WithStatus(http.StatusConflict, api.CodeConflict, fmt.Errorf("kernel %s: %d kernels run already (the most a sandbox has); stop one with DELETE /v1/kernels/{id}", id, maxKernels))
		}
		slot = &kernelSlot{ready: make(chan struct{}), init: map[string]int{}}
		s.kernels[id] = slot
		go func() {
			// A start is bounded by the plugin's context and a timeout, not
			// by the first caller's: a second caller may wait for it.
			ctx, cancel := context.WithTimeout(s.ctx, StartTimeout)
			defer cancel()
			slot.k, slot.err = startKernel(ctx, kernelConfig{Python: s.python, Cwd: s.env.Cwd, Environ: s.env.Environ, Reaper: s.env.Reaper})
			if slot.err != nil {
				s.mu.Lock()
				if s.kernels[id] == slot {
					delete(s.kernels, id)
				}
				s.mu.Unlock()
			}
			close(slot.ready)
		}()
	}
	s.mu.Unlock()
	select {
	case <-slot.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if slot.err != nil {
		return nil, slot.err
	}
	return slot, nil
}

// Execute runs a run_ipython action in the default kernel, as OpenHands'
// Jupyter plugin and action server do.
func (s *Service) Execute(ctx context.Context, a *api.Action) (*api.Observation, error) {
	if a.Action != api.ActionRunIPython {
		return nil, fmt.Errorf("jupyter: action %q is not run_ipython", a.Action)
	}
	var args struct {
		Code           *string `json:"code"`
		IncludeExtra   *bool   `json:"include_extra"`
		KernelInitCode string  `json:"kernel_init_code"`
	}
	if len(a.Args) > 0 {
		if err := json.Unmarshal(a.Args, &args); err != nil {
			return nil, httpapi.BadRequest(fmt.Errorf("run_ipython action: %w", err))
		}
	}
	if args.Code == nil {
		return nil, httpapi.BadRequest(errors.New("run_ipython action: code is required"))
	}
	timeout := DefaultTimeout
	if a.Timeout != nil && *a.Timeout > 0 {
		timeout = api.Seconds(*a.Timeout)
	}
	slot, err := s.kernel(ctx, api.DefaultKernel)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return api.ErrorObservationOf(fmt.Sprintf("The IPython kernel could not start: %v", err)), nil
	}
	cwd := s.workingDir()
	out := &cellOutput{}
	rep, err := s.runCell(ctx, slot, *args.Code, cwd, args.KernelInitCode, timeout, out.add)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, ErrKernelDied):
		out.text.WriteString("\n[The IPython kernel died while it ran this cell; a new kernel starts with the next cell: its state is lost.]")
	case err != nil:
		return api.ErrorObservationOf(fmt.Sprintf("IPython kernel: %v", err)), nil
	}
	content := out.content()
	if rep.Status == "aborted" {
		content = "[The kernel aborted this cell without running it.]"
	}
	if rep.Interrupted {
		content += fmt.Sprintf("\n[Execution timed out after %v: the kernel was interrupted.]", timeout)
		if rep.Restarted {
			content += "\n[The cell did not stop: the kernel was restarted and its state is lost.]"
		}
	}
	content = strings.TrimRight(content, " \t\r\n")
	if args.IncludeExtra == nil || *args.IncludeExtra {
		content += "\n[Jupyter current working directory: " + cwd + "]"
		content += "\n[Jupyter Python interpreter: " + s.python + "]"
	}
	extras := ipythonExtras{Code: *args.Code}
	if len(out.images) > 0 {
		extras.ImageURLs = out.images
	}
	return api.NewObservation(api.ObservationRunIPython, "Code executed in IPython cell.", content, extras), nil
}

// ipythonExtras are IPythonRunCellObservation's extras.
type ipythonExtras struct {
	Code      string   `json:"code"`
	ImageURLs []string `json:"image_urls"`
}

// workingDir is the bash session's working directory, which the kernel
// follows.
func (s *Service) workingDir() string {
	if s.env.WorkingDir != nil {
		if d := s.env.WorkingDir(); d != "" {
			return d
		}
	}
	return s.env.Cwd
}

// runCell runs code in slot's kernel after moving it to cwd (when set and
// not there already) and running initCode (once per kernel), each bounded
// by timeout. A kernel that died is restarted first.
func (s *Service) runCell(ctx context.Context, slot *kernelSlot, code, cwd, initCode string, timeout time.Duration, emit func(api.KernelEvent)) (api.KernelReply, error) {
	slot.cell.Lock()
	defer slot.cell.Unlock()
	k := slot.k
	if !k.alive() {
		if err := k.restart(ctx); err != nil {
			return api.KernelReply{}, err
		}
	}
	if cwd != "" && (slot.cwd != cwd || slot.cwdGen != k.generation()) {
		lit, _ := json.Marshal(cwd)
		rep, err := k.executeFor(ctx, "import os as __bothy_os; __bothy_os.chdir("+string(lit)+"); del __bothy_os", timeout, func(api.KernelEvent) {})
		if err != nil {
			return rep, err
		}
		slot.cwd, slot.cwdGen = cwd, k.generation()
	}
	if initCode != "" && slot.init[initCode] != k.generation() {
		rep, err := k.executeFor(ctx, initCode, timeout, func(api.KernelEvent) {})
		if err != nil {
			return rep, err
		}
		slot.init[initCode] = k.generation()
	}
	return k.executeFor(ctx, code, timeout, emit)
}

// cellOutput collects a cell's outputs as OpenHands' kernel client does:
// streams, the text/plain of results and display data, tracebacks joined
// by newlines, images as data URLs apart.
type cellOutput struct {
	text   strings.Builder
	images []string
	cut    bool
}

func (o *cellOutput) add(ev api.KernelEvent) {
	var t string
	switch ev.Type {
	case api.KernelStdout, api.KernelStderr:
		t = ev.Text
	case api.KernelResult, api.KernelDisplay:
		if p, ok := ev.Data["text/plain"].(string); ok {
			t = p
		}
		if png, ok := ev.Data["image/png"].(string); ok {
			o.images = append(o.images, "data:image/png;base64,"+strings.TrimSpace(png))
		}
	case api.KernelError:
		t = strings.Join(ev.Traceback, "\n")
	}
	if o.text.Len()+len(t) > maxContent {
		t = t[:max(0, maxContent-o.text.Len())]
		o.cut = true
	}
	o.text.WriteString(t)
}

// ansi matches the escape sequences of terminal colours and cursor moves;
// compiled on a cell's first output, not at every executor start.
var ansi = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]`)
})

// content is the observation's text, ANSI sequences stripped.
func (o *cellOutput) content() string {
	t := ansi().ReplaceAllString(o.text.String(), "")
	if o.cut {
		t += "\n[Output truncated: more than 8 MiB.]"
	}
	if strings.TrimSpace(t) == "" {
		return "[Code executed successfully with no output]"
	}
	return t
}

// PIDs are the kernels' processes.
func (s *Service) PIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, slot := range s.kernels {
		select {
		case <-slot.ready:
			if slot.k != nil && slot.k.alive() {
				out = append(out, slot.k.pid())
			}
		default:
		}
	}
	slices.Sort(out)
	return out
}

// stop stops kernel id.
func (s *Service) stop(id string) error {
	s.mu.Lock()
	slot, ok := s.kernels[id]
	if ok {
		delete(s.kernels, id)
	}
	s.mu.Unlock()
	if !ok {
		return errNoKernel
	}
	<-slot.ready
	if slot.k != nil {
		slot.k.close()
	}
	return nil
}

// Close stops every kernel.
func (s *Service) Close() error {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	var ids []string
	for id := range s.kernels {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.stop(id)
	}
	return nil
}
