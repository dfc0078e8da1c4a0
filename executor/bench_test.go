package executor_test

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/executor/api"
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
