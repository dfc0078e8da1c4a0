package bash

import (
	"bytes"
	"time"
)

// phase of a command in the output stream.
type phase int

const (
	phaseAck     phase = iota // sent, waiting for bash to have read it
	phaseRunning              // output belongs to the command
	phaseMeta                 // between BEGIN and END: metadata
	phaseDone                 // END seen
)

// maxMeta bounds the metadata block (a huge $PWD is the only way to grow it).
const maxMeta = 1 << 20

// cmdState is the state of one command (or armed key) in a session.
type cmdState struct {
	tok   *tokens
	phase phase
	out   *capBuf
	carry []byte // held back: may be the start of a token
	meta  []byte
	md    Metadata
	flags string // $- after the command
	echo  bool   // turn echo on once bash has read the command

	started    time.Time
	lastChange time.Time // last output
	viewed     int64     // output offset shown to the agent so far
	hasViewed  bool      // a timeout result has shown part of the output
}

// feed consumes raw PTY bytes. It returns the bytes that follow END (they
// belong to whatever comes next) once the command is done, or nil.
func (c *cmdState) feed(p []byte, now time.Time) (rest []byte) {
	data := p
	if len(c.carry) > 0 {
		data = append(c.carry, p...)
		c.carry = nil
	}
	for len(data) > 0 {
		var tok []byte
		switch c.phase {
		case phaseAck:
			tok = c.tok.ack
		case phaseRunning:
			tok = c.tok.begin
		case phaseMeta:
			tok = c.tok.end
		default:
			return data
		}
		i := bytes.Index(data, tok)
		if i < 0 {
			keep := partialSuffix(data, tok)
			c.emit(data[:len(data)-keep], now)
			if keep > 0 {
				c.carry = append([]byte(nil), data[len(data)-keep:]...)
			}
			return nil
		}
		c.emit(data[:i], now)
		data = data[i+len(tok):]
		switch c.phase {
		case phaseAck:
			c.phase = phaseRunning
		case phaseRunning:
			c.phase = phaseMeta
		case phaseMeta:
			c.md, c.flags = parseMeta(c.meta)
			c.meta = nil
			c.phase = phaseDone
			if len(data) == 0 {
				return nil
			}
			return data
		}
	}
	return nil
}

func (c *cmdState) emit(p []byte, now time.Time) {
	if len(p) == 0 {
		return
	}
	if c.phase == phaseMeta {
		if len(c.meta)+len(p) <= maxMeta {
			c.meta = append(c.meta, p...)
		}
		return
	}
	c.out.Write(p)
	c.lastChange = now
}

// partialSuffix returns the length of the longest suffix of p that is a
// proper prefix of tok (0 almost always: tokens start with 0x1e or NUL).
func partialSuffix(p, tok []byte) int {
	for k := min(len(tok)-1, len(p)); k > 0; k-- {
		if p[len(p)-k] != tok[0] {
			continue
		}
		if bytes.HasPrefix(tok, p[len(p)-k:]) {
			return k
		}
	}
	return 0
}
