package executor_test

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/client"
	"github.com/bothy-sandbox/bothy/executor/reap"
)

// BenchmarkRunTrue is the round trip of POST /v1/processes {"argv":["true"],
// "wait":true} over the Unix socket, through the Go client.
func BenchmarkRunTrue(b *testing.B) {
	ts := newServer(b, executor.Options{})
	ctx := testCtx(b)
	req := api.RunRequest{Argv: []string{"true"}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := ts.c.Run(ctx, req)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

// BenchmarkRunTrueParallel is BenchmarkRunTrue from concurrent clients.
func BenchmarkRunTrueParallel(b *testing.B) {
	ts := newServer(b, executor.Options{})
	ctx := testCtx(b)
	req := api.RunRequest{Argv: []string{"true"}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := ts.c.Run(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAlive is the HTTP round trip alone.
func BenchmarkAlive(b *testing.B) {
	ts := newServer(b, executor.Options{})
	ctx := testCtx(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := ts.c.Alive(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForkExecTrue is the floor: os.StartProcess of true with two
// pipes and a wait, no HTTP.
func BenchmarkForkExecTrue(b *testing.B) {
	path, err := exec.LookPath("true")
	if err != nil {
		b.Skip("requires true in PATH")
	}
	for b.Loop() {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		p, err := os.StartProcess(path, []string{"true"}, &os.ProcAttr{
			Files: []*os.File{nil, w, w}, Sys: &syscall.SysProcAttr{Setpgid: true},
		})
		w.Close()
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, r)
		r.Close()
		if _, err := p.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPtyKeystroke is the round trip of one key through an attached
// terminal: an input frame in, the terminal's echo back as an output frame
// (cat on a cooked terminal; the executor in-process, over the Unix
// socket).
func BenchmarkPtyKeystroke(b *testing.B) {
	benchKeystroke(b, func(ts *testServer, id string) func(byte) {
		conn, err := ts.c.AttachPty(testCtx(b), id, client.AttachOptions{KillOnClose: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		return func(k byte) {
			conn.Write([]byte{k})
		}
	}, func(ts *testServer, id string) io.Reader {
		pr, pw := io.Pipe()
		conn, err := ts.c.AttachPty(testCtx(b), id, client.AttachOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		go func() { conn.Copy(pw); pw.Close() }()
		return pr
	})
}

// BenchmarkPtyKeystrokeREST is BenchmarkPtyKeystroke with a POST per key
// and the output followed as NDJSON events.
func BenchmarkPtyKeystrokeREST(b *testing.B) {
	benchKeystroke(b, func(ts *testServer, id string) func(byte) {
		return func(k byte) {
			if err := ts.c.WritePty(testCtx(b), id, []byte{k}); err != nil {
				b.Fatal(err)
			}
		}
	}, func(ts *testServer, id string) io.Reader {
		pr, pw := io.Pipe()
		go func() {
			ts.c.PtyOutput(testCtx(b), id, 0, true, func(ev *api.Event) error {
				_, err := pw.Write(ev.Bytes())
				return err
			})
			pw.Close()
		}()
		return pr
	})
}

func benchKeystroke(b *testing.B, typer func(*testServer, string) func(byte), reader func(*testServer, string) io.Reader) {
	ts := newServer(b, executor.Options{})
	st, err := ts.c.CreatePty(testCtx(b), api.PtyRequest{Argv: []string{"cat"}})
	if err != nil {
		b.Fatal(err)
	}
	out := reader(ts, st.ID)
	typ := typer(ts, st.ID)
	buf := make([]byte, 1)
	for b.Loop() {
		typ('x')
		if _, err := io.ReadFull(out, buf); err != nil || buf[0] != 'x' {
			b.Fatalf("echo %q %v", buf, err)
		}
	}
}

// BenchmarkNewServer is the construction of a Server (services and route
// table), on the path to ready at every start and in every pool claim.
func BenchmarkNewServer(b *testing.B) {
	r, err := reap.New(reap.Options{Mode: reap.PerProcess})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ReportAllocs()
	for b.Loop() {
		s, err := executor.New(executor.Options{APIKey: "k", Reaper: r})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
