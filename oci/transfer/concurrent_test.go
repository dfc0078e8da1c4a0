package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/oci/ocitest"
)

// Environment of a child process of TestConcurrentProcesses.
const (
	envChild    = "BOTHY_OCI_TEST_CHILD"
	envRoot     = "BOTHY_OCI_TEST_ROOT"
	envRegistry = "BOTHY_OCI_TEST_REGISTRY"
)

func TestMain(m *testing.M) {
	if id := os.Getenv(envChild); id != "" {
		n, _ := strconv.Atoi(id)
		if err := childMain(n); err != nil {
			fmt.Fprintf(os.Stderr, "child %d: %v\n", n, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childMain runs workers on the store and registry named in the environment,
// as a separate bothy process would.
func childMain(id int) error {
	s, err := oci.Open(os.Getenv(envRoot))
	if err != nil {
		return err
	}
	host := os.Getenv(envRegistry)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 5; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			if err := worker(context.Background(), s, host, id*10+w); err != nil {
				errs <- err
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// worker runs a mix of operations picked by n. Errors expected under races
// (a name another worker just removed) are ignored; anything else fails.
func worker(ctx context.Context, s *oci.Store, host string, n int) error {
	pull := func(i int) error {
		_, err := Pull(ctx, s, fmt.Sprintf("docker://%s/conc/img%d:latest", host, i%3), PullOptions{TLSVerify: noTLS()})
		return err
	}
	imp := func(i int) error {
		_, err := s.Import(ctx, bytes.NewReader(rootfsTarBytes(i%4)), fmt.Sprintf("imp%d", i%3))
		return err
	}
	remove := func(ref string) error {
		if err := s.Remove(ctx, ref); err != nil && !errors.Is(err, oci.ErrNotFound) {
			return err
		}
		return nil
	}
	steps := []func() error{
		func() error { return pull(n) },
		func() error { return imp(n) },
		func() error { return remove(fmt.Sprintf("%s/conc/img%d:latest", host, (n+1)%3)) },
		func() error { return pull(n + 1) },
		func() error { return remove(fmt.Sprintf("imp%d", (n+1)%3)) },
		func() error { return imp(n + 1) },
		func() error {
			if n%3 == 0 {
				_, err := s.Prune(ctx)
				return err
			}
			return nil
		},
		func() error {
			if err := s.Tag(ctx, fmt.Sprintf("imp%d", n%3), fmt.Sprintf("tag%d", n%5)); err != nil && !errors.Is(err, oci.ErrNotFound) {
				return err
			}
			return nil
		},
		func() error { return pull(n + 2) },
		func() error {
			if _, err := s.List(ctx); err != nil {
				return err
			}
			img, err := s.Resolve(ctx, fmt.Sprintf("%s/conc/img%d", host, (n+2)%3))
			if err != nil {
				if errors.Is(err, oci.ErrNotFound) {
					return nil
				}
				return err
			}
			// The blobs of a resolved image read back verified (no prune
			// runs while a pull holds the store, but one may run after
			// a concurrent remove: a vanished blob is not corruption).
			for _, l := range img.Layers {
				rc, err := s.OpenBlob(l.Digest)
				if errors.Is(err, oci.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				if err := rc.Close(); err != nil && !errors.Is(err, oci.ErrNotFound) {
					return err
				}
			}
			return nil
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("worker %d step %d: %w", n, i, err)
		}
	}
	return nil
}

// rootfsTarBytes is ocitest.RootfsTar without a testing.TB, for child processes.
var rootfsTarBytes = func() func(int) []byte {
	var mu sync.Mutex
	cache := map[int][]byte{}
	return func(i int) []byte {
		mu.Lock()
		defer mu.Unlock()
		if b, ok := cache[i]; ok {
			return b
		}
		b := ocitest.RootfsTar(nopTB{}, i)
		cache[i] = b
		return b
	}
}()

type nopTB struct{ testing.TB }

func (nopTB) Helper()                   {}
func (nopTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (nopTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

// concRegistry serves conc/img0..2, sharing a base layer.
func concRegistry(t *testing.T) *testRegistry {
	reg := newRegistry(t)
	base := ociImage(t, 100, 1)
	for i := 0; i < 3; i++ {
		l, _ := ociImage(t, int64(101+i), 1).Layers()
		img, err := mutate.AppendLayers(base, l...)
		if err != nil {
			t.Fatal(err)
		}
		reg.push(t, fmt.Sprintf("conc/img%d:latest", i), img)
	}
	return reg
}

// checkFinal re-pulls and re-imports everything, prunes, and checks the
// store holds exactly the blobs its images use.
func checkFinal(t *testing.T, s *oci.Store, host string) {
	t.Helper()
	ctx := context.Background()
	ocitest.CheckConsistent(t, s)
	for i := 0; i < 3; i++ {
		if _, err := Pull(ctx, s, fmt.Sprintf("docker://%s/conc/img%d:latest", host, i), PullOptions{TLSVerify: noTLS()}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Import(ctx, bytes.NewReader(rootfsTarBytes(i)), fmt.Sprintf("imp%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	ocitest.CheckConsistent(t, s)
	// Whatever the first prune left, no image uses: a second one must find
	// nothing (and Verify, in checkConsistent, that every image is whole).
	if freed, err := s.Prune(ctx); err != nil || freed != 0 {
		t.Errorf("blobs no image uses survived prune: %d bytes (%v)", freed, err)
	}
}

func TestConcurrentGoroutines(t *testing.T) {
	reg := concRegistry(t)
	root := filepath.Join(t.TempDir(), "images")
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for n := 0; n < 24; n++ {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			// Each worker has its own oci.Store, as separate processes would.
			s, err := oci.Open(root)
			if err == nil {
				err = worker(context.Background(), s, reg.host, n)
			}
			if err != nil {
				errs <- err
			}
		}(n)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s, err := oci.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	checkFinal(t, s, reg.host)
}

func TestConcurrentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("short: starts child processes")
	}
	reg := concRegistry(t)
	root := filepath.Join(t.TempDir(), "images")
	const procs = 4 // × 5 workers each
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"="+strconv.Itoa(i+1), envRoot+"="+root, envRegistry+"="+reg.host)
		outs[i] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	// The parent works too, concurrently with the children.
	s, err := oci.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for n := 0; n < 4; n++ {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			if err := worker(context.Background(), s, reg.host, 100+n); err != nil {
				t.Error(err)
			}
		}(n)
	}
	wg.Wait()
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child %d: %v\n%s", i+1, err, strings.TrimSpace(outs[i].String()))
		}
	}
	checkFinal(t, s, reg.host)
}
