package names

import (
	"regexp"
	"strings"
	"testing"
)

// The pattern Valid stands for.
var pattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func TestValid(t *testing.T) {
	for _, s := range []string{"", "a", "A9", "-a", "_a", ".a", "a-b_c.d", "a b", "a/b", "é", "a\x00", "ab\n",
		strings.Repeat("a", 128), strings.Repeat("a", 129), "9" + strings.Repeat("-", 127)} {
		if got, want := Valid(s), pattern.MatchString(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	f.Add("box-1")
	f.Add(strings.Repeat("x", 130))
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Valid(s), pattern.MatchString(s); got != want {
			t.Errorf("Valid(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}

func TestID(t *testing.T) {
	idPattern := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, s := range []string{"", "0123456789abcdef0123456789abcdef", "0123456789ABCDEF0123456789abcdef", "0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdef0", "g123456789abcdef0123456789abcdef"} {
		if got, want := ID(s), idPattern.MatchString(s); got != want {
			t.Errorf("ID(%q) = %v, want %v", s, got, want)
		}
	}
}
