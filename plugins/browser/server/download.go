package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-rod/rod/lib/proto"
)

// downloadWait bounds the wait, after the actions, for the downloads they
// began to end.
const downloadWait = 30 * time.Second

// downloads follows the browser's downloads: Chromium saves each under
// its guid in dir (its profile's, private), and a finished one is moved
// into the sandbox's working directory as file_N.EXT, as OpenHands names
// the downloads it hands to the agent.
type downloads struct {
	dir   string // where Chromium saves them
	dest  string // where they are moved
	mu    sync.Mutex
	names map[string]string // by guid: the suggested file name
	open  map[string]bool   // guids begun and not ended
	done  []string          // guids finished and not yet moved
	count int               // files moved so far
	ended chan struct{}     // signalled on each end
}

// watchDownloads tells Chromium to save downloads in dir and follows them.
func (s *service) watchDownloads(dir, dest string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("download directory: %w", err)
	}
	d := &downloads{dir: dir, dest: dest, names: map[string]string{}, open: map[string]bool{}, ended: make(chan struct{}, 1)}
	s.dl = d
	go s.b.EachEvent(func(e *proto.BrowserDownloadWillBegin) {
		d.mu.Lock()
		d.names[e.GUID], d.open[e.GUID] = e.SuggestedFilename, true
		d.mu.Unlock()
	}, func(e *proto.BrowserDownloadProgress) {
		if e.State == proto.BrowserDownloadProgressStateInProgress {
			return
		}
		d.mu.Lock()
		delete(d.open, e.GUID)
		if e.State == proto.BrowserDownloadProgressStateCompleted {
			d.done = append(d.done, e.GUID)
		}
		d.mu.Unlock()
		select {
		case d.ended <- struct{}{}:
		default:
		}
	})()
	return proto.BrowserSetDownloadBehavior{
		Behavior: proto.BrowserSetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: true,
	}.Call(s.b)
}

// collect waits (until ctx is done, at most downloadWait) for the
// downloads under way to end, then moves the finished ones to their
// destination and returns where they are.
func (d *downloads) collect(ctx context.Context) ([]string, error) {
	timer := time.NewTimer(downloadWait)
	defer timer.Stop()
wait:
	for {
		d.mu.Lock()
		n := len(d.open)
		d.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-d.ended:
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, guid := range d.done {
		var dst string
		for {
			d.count++
			dst = filepath.Join(d.dest, "file_"+strconv.Itoa(d.count)+extension(d.names[guid]))
			if _, err := os.Lstat(dst); err != nil {
				break
			}
		}
		if err := moveFile(filepath.Join(d.dir, guid), dst); err != nil {
			d.done = nil
			return out, fmt.Errorf("save the download %s: %w", d.names[guid], err)
		}
		delete(d.names, guid)
		out = append(out, dst)
	}
	d.done = nil
	return out, nil
}

// extension is the extension of a file name a page suggested: a dot and
// at most 10 letters or digits, or nothing.
func extension(name string) string {
	ext := filepath.Ext(name)
	if len(ext) < 2 || len(ext) > 11 {
		return ""
	}
	for _, r := range ext[1:] {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return ""
		}
	}
	return ext
}

// moveFile moves src to dst: a rename, or a copy when they are on
// different file systems.
func moveFile(src, dst string) error {
	if err := os.Rename(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := out.ReadFrom(in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Remove(src)
}
