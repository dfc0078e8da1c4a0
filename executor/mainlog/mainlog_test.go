package mainlog

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readAll(t *testing.T, data []byte) []Line {
	t.Helper()
	r := NewReader(bytes.NewReader(data))
	var out []Line
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
}

// TestCopyRoundTrip: lines, long lines split into parts and joined back,
// a last line without a newline, both streams.
func TestCopyRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 3*maxRecord+5)
	if err := w.Copy("stdout", strings.NewReader("one\n\n"+long+"\nlast")); err != nil {
		t.Fatal(err)
	}
	if err := w.Copy("stderr", strings.NewReader("err\n")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	data, err := os.ReadFile(filepath.Join(dir, LogName))
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, data)
	want := []struct{ stream, text string }{{"stdout", "one"}, {"stdout", ""}, {"stdout", long}, {"stdout", "last"}, {"stderr", "err"}}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i, l := range got {
		if l.Stream != want[i].stream || string(l.Text) != want[i].text || time.Since(l.Time) > time.Hour {
			t.Errorf("line %d: %s %q (%v)", i, l.Stream, l.Text[:min(len(l.Text), 20)], l.Time)
		}
	}
}

// TestRotation: the log never grows past its limit; the one before is
// kept as log.1, and together they hold the latest lines.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, 4096)
	if err != nil {
		t.Fatal(err)
	}
	var in strings.Builder
	for i := range 1000 {
		in.WriteString(strings.Repeat("y", i%50) + "\n")
	}
	if err := w.Copy("stdout", strings.NewReader(in.String())); err != nil {
		t.Fatal(err)
	}
	w.Close()
	for _, name := range []string{LogName, LogName + ".1"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 4096 {
			t.Errorf("%s is %d bytes, over the 4096 limit", name, st.Size())
		}
	}
	old, _ := os.ReadFile(filepath.Join(dir, LogName+".1"))
	cur, _ := os.ReadFile(filepath.Join(dir, LogName))
	lines := readAll(t, append(old, cur...))
	if last := lines[len(lines)-1]; string(last.Text) != strings.Repeat("y", 999%50) {
		t.Errorf("last line %q", last.Text)
	}
}

// TestReaderFollow: a record cut at the end of the input is completed by
// what is appended later, and lines in parts wait for their end.
func TestReaderFollow(t *testing.T) {
	var buf bytes.Buffer
	r := NewReader(&buf)
	buf.WriteString("2026-01-02T03:04:05Z stdout P ab")
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("incomplete record: %v, want EOF", err)
	}
	buf.WriteString("c\n2026-01-02T03:04:05Z stdout F de\n")
	l, err := r.Next()
	if err != nil || string(l.Text) != "abcde" {
		t.Fatalf("got %q, %v; want abcde", l.Text, err)
	}
}

func TestParseRecordRejects(t *testing.T) {
	for _, rec := range []string{"", "x", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z stdin F x", "2026-01-02T03:04:05Z stdout X x", "notatime stdout F x"} {
		if _, _, ok := ParseRecord([]byte(rec)); ok {
			t.Errorf("ParseRecord(%q) accepted", rec)
		}
	}
	if l, _, ok := ParseRecord([]byte("2026-01-02T03:04:05Z stderr F")); !ok || len(l.Text) != 0 {
		t.Errorf("empty full line refused")
	}
}

// FuzzReader: the log is written inside the sandbox and read on the host;
// no bytes make the reader panic, loop, or return a line longer than its
// bound.
func FuzzReader(f *testing.F) {
	f.Add([]byte("2026-01-02T03:04:05.5Z stdout F hello\n2026-01-02T03:04:05Z stderr P a\n2026-01-02T03:04:05Z stderr F b\n"))
	f.Add([]byte(strings.Repeat("z", 70000) + "\n2026-01-02T03:04:05Z stdout F ok\n"))
	f.Add([]byte("2026-01-02T03:04:05Z stdout P " + strings.Repeat("p", 100) + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		for range len(data) + 1 {
			l, err := r.Next()
			if err != nil {
				return
			}
			if len(l.Text) > maxLine || (l.Stream != "stdout" && l.Stream != "stderr") {
				t.Fatalf("line of %d bytes on %q", len(l.Text), l.Stream)
			}
		}
		if _, err := r.Next(); err == nil {
			t.Fatal("more lines than input lines")
		}
	})
}
