package executor

import (
	"context"

	"github.com/bothy-sandbox/bothy/executor/bash"
)

// OOMNote is appended to a session command's suffix (and so to what an agent
// reads) when the OOM killer ended it.
const OOMNote = "\n[The command was killed by the OOM killer: the sandbox ran out of memory.]"

// runSession runs req in sess and reports whether the command it ended was
// OOM-killed: exit code 137 while the cgroup's OOM-kill count rose during
// the call. A kill between two calls for the same command (a poll after a
// timeout) is not seen.
func (s *Server) runSession(ctx context.Context, sess *bash.Session, req bash.RunRequest) (*bash.Result, bool, error) {
	before, known := s.cgroup.OOMKills()
	res, err := sess.Run(ctx, req)
	if err != nil || !known || res.ExitCode != 137 {
		return res, false, err
	}
	after, ok := s.cgroup.OOMKills()
	if !ok || after <= before {
		return res, false, nil
	}
	res.Metadata.Suffix += OOMNote
	return res, true, nil
}
