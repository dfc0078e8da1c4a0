package processes

import (
	"testing"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// BenchmarkStartWaitInternal is the process path alone (no HTTP): start
// true in wait mode and wait for its status and output.
func BenchmarkStartWaitInternal(b *testing.B) {
	s, _ := newService(b, Options{})
	req := api.RunRequest{Argv: []string{"true"}, Wait: true}
	for b.Loop() {
		p, err := s.start(&req, nil, newCapture(s.opts.MaxOutput, s.opts.Output))
		if err != nil {
			b.Fatal(err)
		}
		<-p.done
		s.table.remove(p)
	}
}
