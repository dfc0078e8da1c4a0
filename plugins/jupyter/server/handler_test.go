package server

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidKernelID: the hand-written check is the pattern kernel ids had.
func TestValidKernelID(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	for _, id := range []string{"", "a", "default", "k-1.x_y", "-a", ".a", "a b", "a/b", "é", "a\n",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "9" + strings.Repeat("-", 63)} {
		if got, want := validKernelID(id), pattern.MatchString(id); got != want {
			t.Errorf("validKernelID(%q) = %v, want %v", id, got, want)
		}
	}
}

// TestANSIStripped: a cell's colours and cursor moves leave its content.
func TestANSIStripped(t *testing.T) {
	var o cellOutput
	o.text.WriteString("\x1b[31mred\x1b[0m \x1b[2Kline\x1bM")
	if got := o.content(); !strings.HasPrefix(got, "red line") {
		t.Errorf("content = %q", got)
	}
}
