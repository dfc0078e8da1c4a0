package processes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/executor/internal/budget"
	"github.com/bothy-sandbox/bothy/executor/internal/environ"
	"github.com/bothy-sandbox/bothy/executor/internal/users"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/internal/passwd"
)

// process is a command started through POST /v1/processes.
type process struct {
	s       *Service
	id      string
	mode    string
	argv    []string
	cmd     string
	cwd     string
	proc    *reap.Proc
	started time.Time

	stdinMu   sync.Mutex
	stdin     *os.File // write end; nil when closed or never opened
	stdinPipe *os.File // the same, never cleared: supervise closes it unlocked

	timedOut atomic.Bool
	timer    *time.Timer
	// killGroup: once the process has exited, SIGKILL goes to what is left
	// of its process group (set by kill, and by a terminating signal sent
	// to the group through the API: an interrupted command leaves nothing
	// behind, not even the background jobs sh starts ignoring SIGINT).
	killGroup atomic.Bool

	pumpsLeft atomic.Int32
	pumpsDone chan struct{}

	done   chan struct{} // closed once reaped and output drained
	status reap.Status
	// oomBefore is the cgroup's OOM-kill count when the process started.
	oomBefore uint64
	oomKnown  bool
	finished  time.Time

	// out receives the output: a capture (wait mode), a stream (stream
	// mode) or an outputLog (background).
	out sink
}

// start starts req's command with its output going to out, the sink of
// the request's mode (see newCapture, newStream, newOutputLog); the caller
// kills it when its request ends in wait and stream modes. start owns res,
// the reservation of the request's body: it keeps the part that stands for
// the initial stdin until that is written, and releases the rest once the
// process runs.
func (s *Service) start(req *api.RunRequest, res *budget.Reservation, out sink) (*process, error) {
	defer res.Release()
	if s.closing.Load() {
		return nil, httpapi.ErrShuttingDown
	}
	if s.running.Add(1) > int64(s.opts.MaxProcesses) {
		s.running.Add(-1)
		return nil, fmt.Errorf("start: %d processes are running, the most the executor runs at once: %w", s.opts.MaxProcesses, httpapi.ErrLimit)
	}
	started := false
	defer func() {
		if !started {
			s.running.Add(-1)
		}
	}()
	cred, err := s.user(req.User)
	if err != nil {
		return nil, err
	}
	env := users.Env(environ.Merge(s.opts.Env, req.Env), cred)
	path, argv, err := s.command(req, env)
	if err != nil {
		return nil, err
	}
	initial := req.StdinBytes()
	pp, err := s.openPipes(initial != nil || req.StdinOpen)
	if err != nil {
		return nil, err
	}
	attr := &os.ProcAttr{
		Dir:   req.Cwd,
		Env:   env,
		Files: []*os.File{pp.childIn, pp.outW, pp.errW},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Credential: users.SysCred(cred)},
	}
	oomBefore, oomKnown := s.opts.Cgroup.OOMKills()
	proc, err := s.opts.Reaper.StartProcess(path, argv, attr)
	pp.closeChildEnds()
	if err != nil {
		closeAll(pp.stdinW, pp.outR, pp.errR)
		return nil, startFailed(argv[0], err)
	}
	p := &process{
		s: s, mode: req.Mode(), argv: clipArgv(argv), cmd: clip(req.Cmd), cwd: req.Cwd,
		pumpsDone: make(chan struct{}), done: make(chan struct{}), out: out,
		proc: proc, started: proc.Started, stdin: pp.stdinW, stdinPipe: pp.stdinW,
		oomBefore: oomBefore, oomKnown: oomKnown,
	}
	p.id = "p" + strconv.FormatUint(s.nextID.Add(1), 10)
	s.table.add(p)
	if initial != nil {
		p.feedStdin(initial, res.Split(int64(len(initial))), req.StdinOpen)
	}
	if d := req.TimeoutDuration(); d > 0 {
		p.timer = time.AfterFunc(d, func() {
			p.timedOut.Store(true)
			p.kill()
		})
	}
	started = true
	p.pumpsLeft.Store(2)
	go p.pump(pp.outR, streamStdout)
	go p.pump(pp.errR, streamStderr)
	go p.supervise(pp.outR, pp.errR)
	return p, nil
}

// startFailed is a command that could not be started: the request's
// fault (400 start_failed).
func startFailed(name string, err error) error {
	return httpapi.WithStatus(http.StatusBadRequest, api.CodeStartFailed, fmt.Errorf("start %s: %w", name, err))
}

// user resolves the user a request names: the default when none, the
// executor's own for root.
func (s *Service) user(spec string) (*passwd.Cred, error) {
	c, err := users.Resolve(spec, s.opts.User, s.opts.LookupUser)
	if err != nil {
		return nil, startFailed("as "+spec, err)
	}
	return c, nil
}

// command returns the path and argv that run req: Cmd through the shell,
// Argv with its executable looked up in env's PATH.
func (s *Service) command(req *api.RunRequest, env []string) (string, []string, error) {
	if req.Cmd != "" {
		return s.opts.Shell, []string{filepath.Base(s.opts.Shell), "-c", req.Cmd}, nil
	}
	path, err := environ.LookPath(req.Argv[0], env, req.Cwd)
	if err != nil {
		return "", nil, startFailed(req.Argv[0], err)
	}
	return path, req.Argv, nil
}

// pipes are a process's standard streams: the parent ends are
// non-blocking and pollable; stdin is /dev/null unless it is a pipe.
type pipes struct {
	childIn, stdinW *os.File
	outR, outW      *os.File
	errR, errW      *os.File
}

// openPipes opens stdout and stderr, and stdin when withStdin.
func (s *Service) openPipes(withStdin bool) (*pipes, error) {
	pp := &pipes{childIn: s.devNull}
	var err error
	if withStdin {
		if pp.childIn, pp.stdinW, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("create stdin pipe: %w", err)
		}
	}
	if pp.outR, pp.outW, err = os.Pipe(); err != nil {
		pp.closeChildEnds()
		closeAll(pp.stdinW)
		return nil, fmt.Errorf("create stdout pipe: %w", err)
	}
	if pp.errR, pp.errW, err = os.Pipe(); err != nil {
		pp.closeChildEnds()
		closeAll(pp.stdinW, pp.outR)
		return nil, fmt.Errorf("create stderr pipe: %w", err)
	}
	return pp, nil
}

// closeChildEnds closes the ends the child got (not /dev/null, shared).
func (pp *pipes) closeChildEnds() {
	if pp.stdinW != nil {
		closeAll(pp.childIn)
	}
	closeAll(pp.outW, pp.errW)
}

// feedStdin writes the request's initial stdin, holding its part of the
// request's memory until written; stdin is then closed unless keepOpen
// (later writes queue behind it).
func (p *process) feedStdin(initial []byte, hold *budget.Reservation, keepOpen bool) {
	if keepOpen {
		p.stdinMu.Lock() // writes queue behind the initial data
		go func() {
			defer p.stdinMu.Unlock()
			defer hold.Release()
			p.stdin.Write(initial)
		}()
		return
	}
	go func() {
		p.stdinMu.Lock()
		defer p.stdinMu.Unlock()
		defer hold.Release()
		p.stdin.Write(initial)
		p.stdin.Close()
		p.stdin = nil
	}()
}

// outputCap is what a wait-mode run captures per stream: the request's
// max_output, at most MaxOutput.
func (s *Service) outputCap(req *api.RunRequest) int {
	if req.MaxOutput > 0 && req.MaxOutput < s.opts.MaxOutput {
		return req.MaxOutput
	}
	return s.opts.MaxOutput
}

// retainCap is what a background process retains: the request's
// max_output (at most MaxOutput), MaxRetained when it sets none.
func (s *Service) retainCap(req *api.RunRequest) int {
	if req.MaxOutput == 0 {
		return s.opts.MaxRetained
	}
	return s.outputCap(req)
}

// maxShown caps the command line kept for process listings: a request
// may carry megabytes of script, which a finished process must not keep.
const maxShown = 4 << 10

// clip cuts s for listings at about maxShown bytes, with a mark.
func clip(s string) string {
	if len(s) <= maxShown {
		return s
	}
	return cutString(s, maxShown) + "…" // a copy: s is not kept
}

// cutString returns the first n bytes of s or fewer, on a character
// boundary.
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// clipArgv clips argv for listings to about maxShown bytes in all.
func clipArgv(argv []string) []string {
	n := 0
	for _, a := range argv {
		n += len(a)
	}
	if n <= maxShown {
		return argv
	}
	var out []string
	left := maxShown
	for _, a := range argv {
		if left <= 0 {
			return append(out, "…")
		}
		if len(a) > left {
			a = cutString(a, left) + "…"
		}
		out = append(out, a)
		left -= len(a)
	}
	return out
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// pump copies one output pipe into the process's sink. A UTF-8 character
// split by a read is held back and sent whole with the next chunk. The read
// buffer is taken from the pool only once the pipe is readable, so a quiet
// process holds no buffer.
func (p *process) pump(f *os.File, stream uint8) {
	defer func() {
		if p.pumpsLeft.Add(-1) == 0 {
			close(p.pumpsDone)
		}
	}()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	var carry [utf8.UTFMax]byte
	nc := 0
	for {
		var bp *[]byte
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			if bp == nil {
				bp = readBufPool.Get().(*[]byte)
			}
			for {
				n, rerr = syscall.Read(int(fd), (*bp)[nc:])
				if rerr != syscall.EINTR {
					break
				}
			}
			if rerr == syscall.EAGAIN {
				readBufPool.Put(bp)
				bp = nil
				return false // wait until readable
			}
			return true
		})
		if bp == nil {
			// Nothing read: the pipe was cut (deadline) or closed.
			buf := readBufPool.Get().(*[]byte)
			copy(*buf, carry[:nc])
			if errors.Is(err, os.ErrDeadlineExceeded) {
				p.drain(f, stream, *buf, nc)
			} else if nc > 0 {
				p.out.write(stream, (*buf)[:nc])
			}
			readBufPool.Put(buf)
			return
		}
		buf := *bp
		copy(buf, carry[:nc])
		total := nc + max(n, 0)
		keep := 0
		if rerr == nil && n > 0 {
			keep = incompleteRune(buf[:total])
		}
		if total-keep > 0 {
			p.out.write(stream, buf[:total-keep])
		}
		nc = copy(carry[:], buf[total-keep:total])
		readBufPool.Put(bp)
		if rerr != nil || n <= 0 {
			return
		}
	}
}

// drain reads what is already in a pipe cut by supervise: the deadline
// fails reads without looking at the pipe, and a pump that was slow to be
// scheduled must not lose output written before the process exited. It
// reads without waiting and stops when the pipe is empty (or after a bound,
// for a descendant that keeps writing). buf[:nc] holds bytes carried over
// from the last read.
func (p *process) drain(f *os.File, stream uint8, buf []byte, nc int) {
	f.SetReadDeadline(time.Time{})
	if rc, err := f.SyscallConn(); err == nil {
		for range 64 {
			var n int
			var rerr error
			if err := rc.Read(func(fd uintptr) bool {
				n, rerr = syscall.Read(int(fd), buf[nc:])
				return true // never wait for more
			}); err != nil || rerr != nil || n <= 0 {
				break
			}
			n += nc
			nc = incompleteRune(buf[:n])
			p.out.write(stream, buf[:n-nc])
			copy(buf, buf[n-nc:n])
		}
	}
	if nc > 0 {
		p.out.write(stream, buf[:nc])
	}
}

// incompleteRune returns the length of a UTF-8 sequence cut short at the
// end of b (0 when b ends on a character boundary or is not text).
func incompleteRune(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if b[i] >= utf8.RuneSelf && !utf8.FullRune(b[i:]) {
				return len(b) - i
			}
			return 0
		}
	}
	return 0
}

// supervise waits for the exit and the end of output, then publishes the
// status.
func (p *process) supervise(outR, errR *os.File) {
	<-p.proc.Done()
	if p.killGroup.Load() {
		// The group id cannot be reused while the group has members; an
		// empty group's id could only come back after the pid space
		// wrapped around.
		p.proc.SignalGroup(syscall.SIGKILL)
	}
	st, _ := p.proc.Status()
	if st.Signal == syscall.SIGKILL && p.oomKnown && !p.timedOut.Load() {
		if n, ok := p.s.opts.Cgroup.OOMKills(); ok && n > p.oomBefore {
			st.OOMKilled = true
		}
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	select {
	case <-p.pumpsDone:
	default:
		// A descendant may hold the pipes open: read what comes within
		// WaitDelay, then cut the pipes.
		t := time.NewTimer(p.s.opts.WaitDelay)
		select {
		case <-p.pumpsDone:
		case <-t.C:
			now := time.Now()
			outR.SetReadDeadline(now)
			errR.SetReadDeadline(now)
			<-p.pumpsDone
		}
		t.Stop()
	}
	outR.Close()
	errR.Close()
	p.closeStdin()

	p.status, p.finished = st, time.Now()
	// The slot is free before anyone waiting on done can start another.
	p.s.running.Add(-1)
	close(p.done)
	p.out.close()
	if p.mode == api.ModeBackground {
		p.s.table.finished(p, p.s.opts.MaxFinished)
	}
}

func (p *process) closeStdin() {
	// Closing first unblocks a write stuck on a pipe nobody reads (a
	// descendant holding stdin); it then releases the lock.
	if p.stdinPipe != nil {
		p.stdinPipe.Close()
	}
	p.stdinMu.Lock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
	p.stdinMu.Unlock()
}

// copyStdin copies r to the process's stdin, a pooled buffer at a time,
// and closes stdin if asked. A request that goes away stops a write the
// process does not read.
func (p *process) copyStdin(ctx context.Context, r io.Reader, closeIt bool) (int64, error) {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	f := p.stdin
	if f != nil {
		stop := context.AfterFunc(ctx, func() { f.SetWriteDeadline(time.Now()) })
		defer func() {
			if !stop() {
				f.SetWriteDeadline(time.Time{})
			}
		}()
	}
	bp := readBufPool.Get().(*[]byte)
	defer readBufPool.Put(bp)
	var total int64
	for {
		n, rerr := r.Read(*bp)
		if n > 0 {
			if f == nil {
				return total, ErrStdinClosed
			}
			m, err := f.Write((*bp)[:n])
			total += int64(m)
			if err != nil {
				if errors.Is(err, syscall.EPIPE) {
					return total, fmt.Errorf("write stdin: %w", ErrExited)
				}
				if ctx.Err() != nil {
					return total, fmt.Errorf("write stdin: %w", ctx.Err())
				}
				return total, fmt.Errorf("write stdin: %w", err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return total, httpapi.ReadError(rerr)
		}
	}
	if f == nil && !closeIt {
		return 0, ErrStdinClosed
	}
	if closeIt && f != nil {
		f.Close()
		p.stdin = nil
	}
	return total, nil
}

// kill sends SIGKILL to the process group, and to what is left of it
// once the process has exited (a no-op once it is done).
func (p *process) kill() {
	p.killGroup.Store(true)
	select {
	case <-p.done:
		return
	default:
	}
	p.proc.SignalGroup(syscall.SIGKILL)
}

// exited reports whether the process has been reaped (its output may still
// be draining).
func (p *process) exited() bool {
	select {
	case <-p.proc.Done():
		return true
	default:
		return false
	}
}

// snapshot describes the process on the wire.
func (p *process) snapshot() api.Process {
	ap := api.Process{
		ID: p.id, PID: p.proc.Pid, Mode: p.mode, Argv: p.argv, Cmd: p.cmd, Cwd: p.cwd,
		StartedAt: p.started, TimedOut: p.timedOut.Load(),
	}
	select {
	case <-p.done:
		code := p.status.Code()
		fin := p.finished
		ap.ExitCode, ap.FinishedAt = &code, &fin
		ap.Signal = api.SignalName(p.status.Signal)
		ap.OOMKilled = p.status.OOMKilled
	default:
		ap.Running = true
	}
	p.stdinMu.Lock()
	ap.StdinOpen = p.stdin != nil
	p.stdinMu.Unlock()
	ap.OutputBytes = p.out.size()
	return ap
}

// exitEvent is the last event of a stream; p.done must be closed.
func (p *process) exitEvent(offset int64) *api.Event {
	code := p.status.Code()
	return &api.Event{
		Type: api.EventExit, Offset: offset, ExitCode: &code,
		Signal: api.SignalName(p.status.Signal), TimedOut: p.timedOut.Load(),
		OOMKilled: p.status.OOMKilled,
	}
}

// outputEvent fills ev for a chunk of output.
func outputEvent(ev *api.Event, stream uint8, off int64, data []byte) {
	*ev = api.Event{Type: api.EventStdout, Offset: off}
	if stream == streamStderr {
		ev.Type = api.EventStderr
	}
	if utf8.Valid(data) {
		ev.Data = string(data)
	} else {
		ev.B64 = data
	}
}

// procTable holds the processes by id.
type procTable struct {
	mu       sync.Mutex
	byID     map[string]*process
	finOrder []*process // finished background processes, oldest first
}

func (t *procTable) add(p *process) {
	t.mu.Lock()
	t.byID[p.id] = p
	t.mu.Unlock()
}

func (t *procTable) get(id string) (*process, error) {
	t.mu.Lock()
	p := t.byID[id]
	t.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("process %q: %w", id, ErrNotFound)
	}
	return p, nil
}

func (t *procTable) remove(p *process) {
	t.mu.Lock()
	if t.byID[p.id] == p {
		delete(t.byID, p.id)
		p.out.release()
	}
	if i := slices.Index(t.finOrder, p); i >= 0 {
		t.finOrder = slices.Delete(t.finOrder, i, i+1)
	}
	t.mu.Unlock()
}

// finished records a finished background process and forgets the oldest
// beyond keep.
func (t *procTable) finished(p *process, keep int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[p.id] != p {
		return
	}
	t.finOrder = append(t.finOrder, p)
	for len(t.finOrder) > keep {
		delete(t.byID, t.finOrder[0].id)
		t.finOrder[0].out.release()
		t.finOrder[0] = nil
		t.finOrder = t.finOrder[1:]
	}
}

// all returns the processes ordered by start.
func (t *procTable) all() []*process {
	t.mu.Lock()
	out := make([]*process, 0, len(t.byID))
	for _, p := range t.byID {
		out = append(out, p)
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b *process) int {
		if c := len(a.id) - len(b.id); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return out
}

func (t *procTable) running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.byID {
		select {
		case <-p.done:
		default:
			n++
		}
	}
	return n
}
