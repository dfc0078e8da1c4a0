package api

import "testing"

func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{"SIGINT", "int", "9", "SIG64", "0", "-1", "SIGFOO", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := ParseSignal(s)
		if err == nil && (sig <= 0 || sig > 64) {
			t.Fatalf("ParseSignal(%q) = %d", s, sig)
		}
		if err == nil {
			if back, err := ParseSignal(SignalName(sig)); err != nil || back != sig {
				t.Fatalf("round trip of %d: %d %v", sig, back, err)
			}
		}
	})
}
