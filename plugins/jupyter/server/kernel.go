package server

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/reap"
	"github.com/bothy-sandbox/bothy/plugins"
	"github.com/go-zeromq/zmq4"
)

// ErrKernelDied: the kernel's process exited while it ran a cell.
var ErrKernelDied = errors.New("the kernel died")

// connInfo is a kernel's connection file.
type connInfo struct {
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	IP              string `json:"ip"`
	Key             string `json:"key"`
	Transport       string `json:"transport"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`
}

// kernelConfig is how a kernel is started.
type kernelConfig struct {
	Python  string   // the interpreter, an absolute path
	Cwd     string   // its first working directory
	Environ []string // its environment
	Reaper  *reap.Reaper
}

// kernel is one running IPython kernel and the executor's connection to
// it. Cells run one at a time.
type kernel struct {
	cfg     kernelConfig
	dir     string // private: the connection file and the kernel's log
	sig     signer
	session string
	proc    *reap.Proc
	started time.Time

	shell, control, iopub zmq4.Socket
	cancel                context.CancelFunc // ends the sockets

	mu      sync.Mutex         // guards waiters
	waiters map[string]*waiter // by the request's msg_id

	gen int // counts the starts: a restart loses the kernel's state
}

// startKernel starts an IPython kernel and returns once it answers on its
// shell and iopub channels, or ctx is done.
func startKernel(ctx context.Context, cfg kernelConfig) (*kernel, error) {
	dir, err := os.MkdirTemp("", "bothy-jupyter-")
	if err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	k := &kernel{cfg: cfg, dir: dir, session: newID(), waiters: map[string]*waiter{}}
	if err := k.start(ctx); err != nil {
		k.close()
		return nil, err
	}
	return k, nil
}

func (k *kernel) start(ctx context.Context) error {
	ports, err := freePorts(5)
	if err != nil {
		return fmt.Errorf("start kernel: %w", err)
	}
	var key [32]byte
	rand.Read(key[:])
	ci := connInfo{
		ShellPort: ports[0], IOPubPort: ports[1], StdinPort: ports[2], ControlPort: ports[3], HBPort: ports[4],
		IP: "127.0.0.1", Key: hex.EncodeToString(key[:]), Transport: "tcp", SignatureScheme: "hmac-sha256", KernelName: "python3",
	}
	k.sig = signer{key: []byte(ci.Key)}
	b, _ := json.Marshal(ci)
	connFile := filepath.Join(k.dir, "kernel.json")
	if err := os.WriteFile(connFile, b, 0o600); err != nil {
		return fmt.Errorf("start kernel: write connection file: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(k.dir, "kernel.log"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("start kernel: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(k.cfg.Python, "-m", "ipykernel_launcher", "-f", connFile)
	cmd.Dir = k.cfg.Cwd
	cmd.Env = k.cfg.Environ
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group; and if bothy-plugin ends without closing the
	// service (a crash), the kernel goes too, instead of running on, re-parented
	// to the executor.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	k.started = time.Now()
	proc, err := k.cfg.Reaper.Start(cmd)
	if err != nil {
		return fmt.Errorf("start kernel: %s: %w", k.cfg.Python, err)
	}
	k.mu.Lock()
	k.proc = proc
	k.gen++
	k.mu.Unlock()
	sctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	k.shell = zmq4.NewDealer(sctx, zmq4.WithDialerRetry(20*time.Millisecond), zmq4.WithDialerMaxRetries(-1), zmq4.WithAutomaticReconnect(false))
	k.control = zmq4.NewDealer(sctx, zmq4.WithDialerRetry(20*time.Millisecond), zmq4.WithDialerMaxRetries(-1), zmq4.WithAutomaticReconnect(false))
	k.iopub = zmq4.NewSub(sctx, zmq4.WithDialerRetry(20*time.Millisecond), zmq4.WithDialerMaxRetries(-1), zmq4.WithAutomaticReconnect(false))

	// Dial once the kernel listens: the dials retry until its ports
	// accept, and end with it (or with ctx).
	dialed := make(chan error, 1)
	go func() {
		addr := func(port int) string { return "tcp://127.0.0.1:" + strconv.Itoa(port) }
		err := errors.Join(k.shell.Dial(addr(ci.ShellPort)), k.control.Dial(addr(ci.ControlPort)), k.iopub.Dial(addr(ci.IOPubPort)))
		if err == nil {
			err = k.iopub.SetOption(zmq4.OptionSubscribe, "")
		}
		dialed <- err
	}()
	select {
	case err = <-dialed:
	case <-proc.Done():
		err = k.exited(logf)
	case <-ctx.Done():
		err = fmt.Errorf("start kernel: %w", ctx.Err())
	}
	if err != nil {
		return err
	}
	for _, s := range []zmq4.Socket{k.shell, k.control, k.iopub} {
		go k.read(s, k.sig)
	}

	// Ready once a kernel_info request is answered on shell and its status
	// reaches us on iopub: then the subscription is live and no output of
	// the first cell can be lost.
	for {
		id, ch, err := k.send(k.shell, "kernel_info_request", json.RawMessage("{}"))
		if err != nil {
			return err
		}
		got := false
		timer := time.NewTimer(500 * time.Millisecond)
	wait:
		for {
			select {
			case m := <-ch:
				if m.Header.MsgType == "status" {
					got = true
					break wait
				}
			case <-timer.C:
				break wait
			case <-proc.Done():
				timer.Stop()
				k.unwait(id)
				return k.exited(logf)
			case <-ctx.Done():
				timer.Stop()
				k.unwait(id)
				return fmt.Errorf("start kernel: %w", ctx.Err())
			}
		}
		timer.Stop()
		k.unwait(id)
		if got {
			return k.importSkills(ctx)
		}
	}
}

// agentSkills is bothy's agent skills module, which every kernel imports.
//
//go:embed agentskills.py
var agentSkills []byte

// importSkills puts the agent skills module in the kernel's private
// directory, on its sys.path, and imports its functions into the kernel's
// namespace (from agentskills import *), as OpenHands' runtime does: in a
// silent cell, which neither counts nor prints.
func (k *kernel) importSkills(ctx context.Context) error {
	dir := filepath.Join(k.dir, "python")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("start kernel: agent skills: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agentskills.py"), agentSkills, 0o600); err != nil {
		return fmt.Errorf("start kernel: agent skills: %w", err)
	}
	lit, _ := json.Marshal(dir)
	code := "import sys as __bothy_sys\nif " + string(lit) + " not in __bothy_sys.path: __bothy_sys.path.insert(0, " + string(lit) + ")\ndel __bothy_sys\nfrom agentskills import *\n"
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var msg []string
	rep, err := k.run(ctx, code, true, func(ev api.KernelEvent) {
		if ev.Type == api.KernelError {
			msg = append(msg, ev.Name+": "+ev.Value)
		}
	})
	if err != nil {
		return fmt.Errorf("start kernel: import agent skills: %w", err)
	}
	if rep.Status != "ok" {
		return fmt.Errorf("start kernel: import agent skills: %s %s", rep.Status, strings.Join(msg, "; "))
	}
	return nil
}

// exited describes a kernel that ended during its start, with the end of
// its log (a missing ipykernel says so there).
func (k *kernel) exited(log *os.File) error {
	st, _ := k.process().Status()
	b, _ := os.ReadFile(log.Name())
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	err := fmt.Errorf("start kernel: %s -m ipykernel_launcher exited (status %d): %s", k.cfg.Python, st.Code(), b)
	if bytes.Contains(b, []byte("No module named ipykernel")) {
		err = fmt.Errorf("%w: %s has no ipykernel module: install Debian's python3-ipykernel in the image (bothy build --plugins jupyter)", plugins.ErrUnavailable, k.cfg.Python)
	}
	return err
}

// freePorts returns n distinct free TCP ports of the loopback: held open
// together, then released for the kernel to bind.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port on the loopback: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// read hands the messages of one socket to their waiters, by the msg_id
// of their parent; a message that does not verify, or that no one waits
// for, is dropped.
func (k *kernel) read(s zmq4.Socket, sig signer) {
	for {
		msg, err := s.Recv()
		if err != nil {
			return
		}
		m, err := sig.decode(msg.Frames)
		if err != nil {
			continue
		}
		k.mu.Lock()
		w := k.waiters[m.Parent.MsgID]
		k.mu.Unlock()
		if w != nil {
			select {
			case w.ch <- m:
			case <-w.done:
			}
		}
	}
}

// send sends a request on s and returns its msg_id and the channel that
// receives the replies and iopub messages whose parent it is.
func (k *kernel) send(s zmq4.Socket, msgType string, content any) (string, chan *Message, error) {
	c, err := json.Marshal(content)
	if err != nil {
		return "", nil, fmt.Errorf("encode %s: %w", msgType, err)
	}
	m := &Message{Header: newHeader(k.session, msgType), Content: c}
	frames, err := k.sig.encode(m)
	if err != nil {
		return "", nil, err
	}
	w := &waiter{ch: make(chan *Message, 64), done: make(chan struct{})}
	k.mu.Lock()
	k.waiters[m.Header.MsgID] = w
	k.mu.Unlock()
	if err := s.SendMulti(zmq4.NewMsgFrom(frames...)); err != nil {
		k.unwait(m.Header.MsgID)
		return "", nil, fmt.Errorf("send %s: %w", msgType, err)
	}
	return m.Header.MsgID, w.ch, nil
}

// waiter receives the messages whose parent is one request, until done.
type waiter struct {
	ch   chan *Message
	done chan struct{}
}

// unwait ends the wait for the messages of request id.
func (k *kernel) unwait(id string) {
	k.mu.Lock()
	if w := k.waiters[id]; w != nil {
		close(w.done)
		delete(k.waiters, id)
	}
	k.mu.Unlock()
}

// interruptGrace is how long an interrupted cell has to stop before its
// kernel is restarted.
var interruptGrace = 3 * time.Second

// execute runs code as one cell, handing each output to emit as it comes,
// until the kernel is idle again. When ctx is done first (the cell's
// timeout), the kernel is interrupted with SIGINT and, if the cell does
// not end within interruptGrace, the kernel is restarted: execute returns
// a Reply that says so, and an error only when the kernel cannot run.
func (k *kernel) execute(ctx context.Context, code string, emit func(api.KernelEvent)) (api.KernelReply, error) {
	return k.run(ctx, code, false, emit)
}

// run is execute, of a silent cell (not in the history, not counted, no
// result published) when silent: the executor's own, which ctx's end
// abandons without interrupting the kernel.
func (k *kernel) run(ctx context.Context, code string, silent bool, emit func(api.KernelEvent)) (api.KernelReply, error) {
	p := k.process()
	if !k.alive() {
		return api.KernelReply{}, ErrKernelDied
	}
	// stop_on_error is off: cells run one at a time, so no request of
	// ours waits in the kernel's queue to be cancelled, and with it on,
	// ipykernel aborts (answers "aborted" without running) a request that
	// reaches it before its abort window after an error has closed, which
	// the idle status that follows the error does not wait for.
	id, ch, err := k.send(k.shell, "execute_request", map[string]any{
		"code": code, "silent": silent, "store_history": !silent, "user_expressions": map[string]any{},
		"allow_stdin": false, "stop_on_error": false,
	})
	if err != nil {
		return api.KernelReply{}, err
	}
	defer k.unwait(id)
	var (
		rep              api.KernelReply
		gotReply, isIdle bool
		grace            <-chan time.Time
		done             = ctx.Done()
	)
	for !gotReply || !isIdle {
		select {
		case m := <-ch:
			k.handle(m, &rep, &gotReply, &isIdle, emit)
		case <-done:
			if silent {
				// The executor's own cell: no interrupt, no restart.
				return rep, ctx.Err()
			}
			done = nil
			rep.Interrupted = true
			p.Signal(syscall.SIGINT)
			grace = time.After(interruptGrace)
		case <-grace:
			rep.Status, rep.Restarted = "timeout", true
			if err := k.restart(context.Background()); err != nil {
				return rep, fmt.Errorf("restart the kernel after an interrupt did not stop its cell: %w", err)
			}
			return rep, nil
		case <-p.Done():
			return rep, ErrKernelDied
		}
	}
	if rep.Interrupted {
		rep.Status = "timeout"
	}
	return rep, nil
}

// handle takes one message of a running cell.
func (k *kernel) handle(m *Message, rep *api.KernelReply, gotReply, isIdle *bool, emit func(api.KernelEvent)) {
	switch m.Header.MsgType {
	case "execute_reply":
		var c struct {
			Status         string `json:"status"`
			ExecutionCount int    `json:"execution_count"`
		}
		json.Unmarshal(m.Content, &c)
		rep.Status, rep.ExecutionCount, *gotReply = c.Status, c.ExecutionCount, true
	case "status":
		var c struct {
			State string `json:"execution_state"`
		}
		json.Unmarshal(m.Content, &c)
		if c.State == "idle" {
			*isIdle = true
		}
	case "stream":
		var c struct {
			Name string `json:"name"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &c) == nil && (c.Name == "stdout" || c.Name == "stderr") {
			emit(api.KernelEvent{Type: c.Name, Text: c.Text})
		}
	case "display_data", "execute_result":
		var c struct {
			Data           map[string]any `json:"data"`
			ExecutionCount int            `json:"execution_count"`
		}
		if json.Unmarshal(m.Content, &c) == nil {
			ev := api.KernelEvent{Type: api.KernelDisplay, Data: c.Data}
			if m.Header.MsgType == "execute_result" {
				ev.Type, ev.ExecutionCount = api.KernelResult, c.ExecutionCount
			}
			emit(ev)
		}
	case "error":
		var c struct {
			Name      string   `json:"ename"`
			Value     string   `json:"evalue"`
			Traceback []string `json:"traceback"`
		}
		if json.Unmarshal(m.Content, &c) == nil {
			emit(api.KernelEvent{Type: api.KernelError, Name: c.Name, Value: c.Value, Traceback: c.Traceback})
		}
	}
}

// restart replaces the kernel's process with a fresh one (its state is
// lost), on the same private directory.
func (k *kernel) restart(ctx context.Context) error {
	k.stop()
	return k.start(ctx)
}

// executeFor is execute with the cell bounded by timeout.
func (k *kernel) executeFor(ctx context.Context, code string, timeout time.Duration, emit func(api.KernelEvent)) (api.KernelReply, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return k.execute(ctx, code, emit)
}

// process is the kernel's current process.
func (k *kernel) process() *reap.Proc {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.proc
}

// alive reports whether the kernel's process runs.
func (k *kernel) alive() bool {
	p := k.process()
	if p == nil {
		return false
	}
	_, done := p.Status()
	return !done
}

// pid is the kernel's process id.
func (k *kernel) pid() int { return k.process().Pid }

// generation counts the kernel's starts.
func (k *kernel) generation() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gen
}

// stop ends the kernel's process (its group: what the kernel started
// too) and the sockets.
func (k *kernel) stop() {
	if k.cancel != nil {
		k.cancel()
		for _, s := range []zmq4.Socket{k.shell, k.control, k.iopub} {
			if s != nil {
				s.Close()
			}
		}
	}
	if p := k.process(); p != nil {
		p.SignalGroup(syscall.SIGKILL)
		p.Wait(context.Background())
	}
	k.mu.Lock()
	for id, w := range k.waiters {
		close(w.done)
		delete(k.waiters, id)
	}
	k.mu.Unlock()
}

// close stops the kernel and removes its directory.
func (k *kernel) close() {
	k.stop()
	os.RemoveAll(k.dir)
}
