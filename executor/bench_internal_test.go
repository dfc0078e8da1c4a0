package executor

import (
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// BenchmarkStartWaitInternal is the process path alone (no HTTP): start
// true in wait mode and wait for its status and output.
func BenchmarkStartWaitInternal(b *testing.B) {
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	req := api.RunRequest{Argv: []string{"true"}, Wait: true}
	for b.Loop() {
		p, err := s.start(&req, nil, newCapture(s.opts.MaxOutput, s.outMem))
		if err != nil {
			b.Fatal(err)
		}
		<-p.done
		s.procs.remove(p)
	}
}
