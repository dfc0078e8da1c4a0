// Package names checks the names bothy gives things that become file
// names, cgroup names and nftables names: a sandbox's ID and name, a
// volume's, a pool's, a named network's.
package names

// MaxLen is the longest name.
const MaxLen = 128

// Valid reports whether s is a name: a letter or digit, then at most 127
// letters, digits, '_', '.' or '-' (ASCII), the pattern
// ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$. Checked by hand: that regexp compiles
// into 127 copies of its class, a millisecond at every start of the CLI.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen || !alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// ID reports whether s is a sandbox ID as bothy makes them: 32 lower-case
// hexadecimal digits.
func ID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
