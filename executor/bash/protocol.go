package bash

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
)

// The wire protocol between a Session and its bash, all through the PTY.
//
// Commands never reach bash's parser as typed text. The Session encodes a
// command as ANSI-C quoted chunks ($'...', printable ASCII only, so no
// line is longer than the terminal's 4095-byte canonical limit, no byte is
// a signal character and nothing is history-expanded) and sends lines
// that rebuild it in a shell variable, arm a fresh nonce and eval it at
// the top level:
//
//	:;{ __bothy_c=$'echo hi';__bothy_go NONCE;}&&:;\builtin eval "$__bothy_c"
//
// __bothy_go arms the nonce, records the command in the history, prints
// the ACK token and restores $? of the previous command; "&&:" keeps a
// non-zero $? from tripping errexit. Because the whole command is one
// eval, bash prompts once, after all of it, however many lines it spans.
// PROMPT_COMMAND then prints, in one write, the command's metadata between
// the BEGIN and END tokens of its nonce and disarms it. Nothing forks at a
// prompt: python is found as `which` finds it, by `hash python`, which
// searches PATH afresh and leaves the path in BASH_CMDS.
//
// The nonce is 128 random bits, new for each command, so no output (a log
// holding an old marker, a guess of the format) can end a command early.
// A command that reads the shell's own variables could learn it; that is
// the agent attacking itself.
//
// With `set -x` on, the braces carry 2>/dev/null so the protocol is not
// traced. With `set -e` on, eval's own status would trip errexit where
// typing the command would not (false && true), so the eval'd text ends
// by saving $? and eval returns 0. The Session knows both from $-, which
// the metadata carries.
//
// The terminal does not echo while bash reads these lines. The ACK says
// bash has read them all; __bothy_go then waits in a plain `read` (which,
// unlike read -s or -n, leaves the terminal modes alone) until the
// Session has turned echo on and sent VEOF, which the terminal never
// echoes. So the command starts with an echoing terminal, as on any
// terminal, and anything it changes (read -s, getpass) stays changed;
// echo is turned off again before the next command is sent.
//
// For a special key sent while bash is idle (C-c at the prompt) the nonce
// is armed by PROMPT_COMMAND (mode k), which prints the ACK token; the
// Session waits for it and only then sends the key, since the key's
// signal flushes input bash has not read yet.

const tokenPrefix = "\x1eBOTHY:"

// tokens are the markers of one nonce.
type tokens struct {
	nonce string
	ack   []byte // printed once bash has read the command (or armed a key)
	begin []byte // starts the metadata
	end   []byte // ends the metadata
}

func newTokens() (*tokens, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	return tokensFor(hex.EncodeToString(b[:])), nil
}

func tokensFor(nonce string) *tokens {
	return &tokens{
		nonce: nonce,
		ack:   []byte(tokenPrefix + nonce + ":A\x1e"),
		begin: []byte(tokenPrefix + nonce + ":B\x00"),
		end:   []byte("\x00" + tokenPrefix + nonce + ":E\x1e"),
	}
}

// initScript configures the interactive bash: no prompts of its own, the
// protocol functions, and PROMPT_COMMAND. Each line stays well under the
// terminal's line limit. Helpers use `builtin` so user functions named
// printf or type cannot change them, and ${x-} so `set -u` cannot break
// them; PROMPT_COMMAND runs with stderr on /dev/null so `set -x` traces
// nothing of ours.
var initScript = strings.Join([]string{
	` PS1='';PS2='';unset PS0 PROMPT_COMMAND;set +H;set -o ignoreeof;HISTCONTROL=ignorespace`,
	` __bothy_a='';__bothy_n='';__bothy_r='';__bothy_c='';__bothy_C=();__bothy_st=0;__bothy_U='\u';__bothy_H='\h';__bothy_U0=${USER-};__bothy_H0=${HOSTNAME%%.*};__bothy_P=0;((BASH_VERSINFO[0]*100+BASH_VERSINFO[1]>=404))&&__bothy_P=1`,
	` __bothy_go(){ local TMOUT='';__bothy_r='';case ${2-} in k) __bothy_n=$1;; s) __bothy_a=$1;; *) __bothy_a=$1;builtin history -s -- "$__bothy_c";builtin printf '\036BOTHY:%s:A\036' "$1";builtin read -r __bothy_n||:;__bothy_n='';; esac;return "$__bothy_st";}`,
	` __bothy_pc(){ local e=$? p=${!-} u='' h='' y='';[[ -z ${__bothy_r-} ]]||e=$__bothy_r;__bothy_r='';if [[ -n ${__bothy_a-} ]];then if ((__bothy_P));then u=${__bothy_U@P} h=${__bothy_H@P};else u=$__bothy_U0 h=$__bothy_H0;fi;builtin hash python&&y=${BASH_CMDS[python]-};builtin printf '\036BOTHY:%s:B\0%s\0%s\0%s\0%s\0%s\0%s\0%s\0\036BOTHY:%s:E\036' "$__bothy_a" "$e" "$p" "$u" "$h" "$PWD" "$-" "$y" "$__bothy_a";__bothy_a='' __bothy_c='' __bothy_st=$e;fi;if [[ -n ${__bothy_n-} ]];then __bothy_a=$__bothy_n __bothy_n='';builtin printf '\036BOTHY:%s:A\036' "$__bothy_a";fi;}`,
	` PROMPT_COMMAND='{ __bothy_pc;} 2>/dev/null'`,
	``,
}, "\n")

// chunkBytes bounds the encoded bytes of one line of a command.
const chunkBytes = 3000

// commandLines encodes cmd and returns the lines that make bash run it
// under nonce. errexit says `set -e` is on and cmd is lexically complete;
// xtrace says `set -x` is on, and the protocol's own commands are then
// run with stderr on /dev/null so they are not traced.
//
// Every line starts with ":;": after an eval that hit the end of its text
// inside a quote, bash 5.2 fails to recognise a "{" opening the next line.
func commandLines(cmd, nonce string, errexit, xtrace bool) []byte {
	chunks := encodeChunks(cmd)
	quiet := ";}"
	if xtrace {
		quiet = ";} 2>/dev/null"
	}
	var b bytes.Buffer
	last := len(chunks) - 1
	for i, c := range chunks[:last] {
		if i == 0 {
			b.WriteString(" :;{ __bothy_C=($'")
		} else {
			b.WriteString(" :;{ __bothy_C+=($'")
		}
		b.WriteString(c)
		b.WriteString("')")
		b.WriteString(quiet)
		b.WriteByte('\n')
	}
	if last == 0 {
		b.WriteString(" :;{ __bothy_c=$'")
		b.WriteString(chunks[last])
		b.WriteString("';")
	} else {
		b.WriteString(" :;{ __bothy_C+=($'")
		b.WriteString(chunks[last])
		b.WriteString(`');builtin printf -v __bothy_c %s "${__bothy_C[@]}";__bothy_C=();`)
	}
	b.WriteString("__bothy_go ")
	b.WriteString(nonce)
	b.WriteString(quiet)
	b.WriteString("&&:;\\builtin eval \"$__bothy_c\"")
	if errexit {
		b.WriteString(`$'\n\n__bothy_r=$?'`)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// armLine arms nonce without a command: mode "s" prints the markers right
// after this line (a sync), mode "k" arms at the next prompt, for a key,
// and prints the ACK token.
func armLine(nonce, mode string) []byte {
	return []byte(" :;{ __bothy_go " + nonce + " " + mode + ";} 2>/dev/null&&:\n")
}

// encodeChunks splits cmd into ANSI-C quoted bodies of at most chunkBytes
// bytes: printable ASCII stays, everything else is \xHH. NUL bytes, which
// no shell string can hold, are dropped.
func encodeChunks(cmd string) []string {
	var chunks []string
	var b strings.Builder
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		if c == 0 {
			continue
		}
		if b.Len()+4 > chunkBytes {
			chunks = append(chunks, b.String())
			b.Reset()
		}
		if c >= 0x20 && c < 0x7f && c != '\'' && c != '\\' && c != '!' {
			b.WriteByte(c)
			continue
		}
		b.WriteString(`\x`)
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return append(chunks, b.String())
}

const hexDigits = "0123456789abcdef"

// parseMeta decodes the fields PROMPT_COMMAND prints between BEGIN and
// END: exit code, $!, user, host, cwd, $- and `type -P python` output,
// each followed by NUL (the last by END). It returns the metadata and the
// shell's option flags.
func parseMeta(p []byte) (Metadata, string) {
	md := Metadata{ExitCode: -1, PID: -1}
	f := bytes.Split(p, []byte{0})
	field := func(i int) string {
		if i >= len(f) {
			return ""
		}
		return strings.ReplaceAll(string(f[i]), "\r\n", "\n")
	}
	if n, err := strconv.Atoi(field(0)); err == nil {
		md.ExitCode = n
	}
	if n, err := strconv.Atoi(field(1)); err == nil {
		md.PID = n
	}
	md.Username = field(2)
	md.Hostname = field(3)
	md.WorkingDir = field(4)
	md.PyInterpreterPath = strings.TrimRight(field(6), "\r\n")
	return md, field(5)
}
