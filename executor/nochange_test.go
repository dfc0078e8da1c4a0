package executor_test

import (
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor"
)

func TestNoChangeTimeoutFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want time.Duration
		ok   bool
		bad  bool
	}{
		{nil, 0, false, false},
		{[]string{"PATH=/bin"}, 0, false, false},
		{[]string{"NO_CHANGE_TIMEOUT_SECONDS=3"}, 3 * time.Second, true, false},
		{[]string{"NO_CHANGE_TIMEOUT_SECONDS=3", "NO_CHANGE_TIMEOUT_SECONDS=30"}, 30 * time.Second, true, false},
		{[]string{"NO_CHANGE_TIMEOUT_SECONDS=2.5"}, 0, true, true},
		{[]string{"NO_CHANGE_TIMEOUT_SECONDS=0"}, 0, true, true},
		{[]string{"NO_CHANGE_TIMEOUT_SECONDS="}, 0, true, true},
	} {
		d, ok, err := executor.NoChangeTimeoutFromEnv(tc.env)
		if d != tc.want || ok != tc.ok || (err != nil) != tc.bad {
			t.Errorf("%v: %v %v %v", tc.env, d, ok, err)
		}
	}
}
