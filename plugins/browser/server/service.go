package server

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	imagepng "image/png"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/proto"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
	"github.com/bothy-sandbox/bothy/internal/proc"
	"github.com/bothy-sandbox/bothy/plugins"
)

//go:embed page.js
var pageJS string

// Timeouts.
const (
	// DefaultActionTimeout bounds an action and its observation when the
	// action gives no timeout.
	DefaultActionTimeout = 60 * time.Second
	// elementTimeout bounds the wait for an element to be actionable.
	elementTimeout = 5 * time.Second
	// loadTimeout bounds the wait for a page's load after an action: a page
	// still loading then is observed as it is.
	loadTimeout = 15 * time.Second
	// settleDelay is how long after an action a navigation it caused has
	// to begin to be waited for.
	settleDelay = 50 * time.Millisecond
)

// service is a running browser: Chromium and rod's connection to it. Its
// actions run one at a time.
type service struct {
	env    plugins.Env
	chrome *chromium
	b      *rod.Browser
	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	dl *downloads // the browser's downloads

	mu       sync.Mutex
	tabs     []*tab // in the order opened: open_pages_urls
	active   int
	messages []string
}

// tab is one page (a tab) of the browser.
type tab struct {
	p       *rod.Page
	loading atomic.Int32 // main frame: started and not stopped loading
}

func init() { plugins.RegisterServer("browser", Start) }

// Start starts Chromium and connects to it: the browser plugin's service,
// run in bothy-plugin.
func Start(ctx context.Context, env plugins.Env) (plugins.Service, error) {
	bin, err := findChromium(env.Environ)
	if err != nil {
		return nil, fmt.Errorf("start browser: %w", err)
	}
	if env.Reaper == nil {
		return nil, errors.New("start browser: no reaper")
	}
	c, err := launch(env, bin)
	if err != nil {
		return nil, err
	}
	s := &service{env: env, chrome: c}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// The first call waits for Chromium to read its pipe; a Chromium that
	// exits closes it.
	stop := context.AfterFunc(ctx, s.cancel)
	s.b = rod.New().Client(c.cdp).Context(s.ctx).NoDefaultDevice()
	err = s.b.Connect()
	if !stop() {
		err = ctx.Err() // the start's time ran out meanwhile
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("start %s: no DevTools answer: %w; its log: %s", bin, err, c.tail())
	}
	if err := s.watchDownloads(filepath.Join(c.dir, "downloads"), env.Cwd); err != nil {
		s.Close()
		return nil, fmt.Errorf("start browser: %w", err)
	}
	pages, err := s.b.Pages()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("start browser: list its pages: %w", err)
	}
	for _, p := range pages {
		if err := s.addTab(p); err != nil {
			s.Close()
			return nil, fmt.Errorf("start browser: %w", err)
		}
	}
	if len(s.tabs) == 0 {
		if _, err := s.newTab(); err != nil {
			s.Close()
			return nil, fmt.Errorf("start browser: open a page: %w", err)
		}
	}
	if env.Log != nil {
		env.Log.Info("browser started", "chromium", bin, "pid", c.proc.Pid)
	}
	return s, nil
}

// addTab tracks page p: its loads, and its dialogs, dismissed as
// Playwright (BrowserGym's driver) dismisses them.
func (s *service) addTab(p *rod.Page) error {
	p = p.Context(s.ctx)
	t := &tab{p: p}
	if err := (proto.PageEnable{}).Call(p); err != nil {
		return fmt.Errorf("enable page events: %w", err)
	}
	if err := p.SetViewport(&proto.EmulationSetDeviceMetricsOverride{Width: viewportWidth, Height: viewportHeight, DeviceScaleFactor: 1}); err != nil {
		return fmt.Errorf("set the viewport: %w", err)
	}
	go p.EachEvent(func(e *proto.PageFrameStartedLoading) {
		if e.FrameID == p.FrameID {
			t.loading.Store(1)
		}
	}, func(e *proto.PageFrameStoppedLoading) {
		if e.FrameID == p.FrameID {
			t.loading.Store(0)
		}
	}, func(e *proto.PageJavascriptDialogOpening) {
		go proto.PageHandleJavaScriptDialog{Accept: e.Type == proto.PageDialogTypeBeforeunload}.Call(p)
	})()
	s.tabs = append(s.tabs, t)
	return nil
}

// newTab opens a blank page and makes it the active one.
func (s *service) newTab() (*tab, error) {
	p, err := s.b.Page(proto.TargetCreateTarget{URL: "about:blank"})
	if err != nil {
		return nil, err
	}
	if err := s.addTab(p); err != nil {
		return nil, err
	}
	s.active = len(s.tabs) - 1
	return s.tabs[s.active], nil
}

// syncTabs adds the pages the browser opened by itself (a link with a
// target, window.open), making the newest active as BrowserGym does, and
// forgets the closed ones.
func (s *service) syncTabs() error {
	pages, err := s.b.Pages()
	if err != nil {
		return fmt.Errorf("list pages: %w", err)
	}
	live := map[proto.TargetTargetID]bool{}
	for _, p := range pages {
		live[p.TargetID] = true
	}
	cur := s.cur()
	s.tabs = slices.DeleteFunc(s.tabs, func(t *tab) bool { return !live[t.p.TargetID] })
	s.active = max(0, slices.Index(s.tabs, cur))
	if cur == nil || !live[cur.p.TargetID] {
		s.active = len(s.tabs) - 1
	}
	for _, p := range pages {
		if !slices.ContainsFunc(s.tabs, func(t *tab) bool { return t.p.TargetID == p.TargetID }) {
			if err := s.addTab(p); err != nil {
				return err
			}
			s.active = len(s.tabs) - 1
		}
	}
	if len(s.tabs) == 0 {
		if _, err := s.newTab(); err != nil {
			return fmt.Errorf("open a page: %w", err)
		}
	}
	return nil
}

func (s *service) cur() *tab {
	if s.active < 0 || s.active >= len(s.tabs) {
		return nil
	}
	return s.tabs[s.active]
}

// Handler serves the native routes.
func (s *service) Handler() http.Handler { return s.routes() }

// PIDs are Chromium's processes: the browser and its renderers, GPU and
// utility processes, whose memory the executor reports as the plugin's.
func (s *service) PIDs() []int { return proc.Tree(s.chrome.proc.Pid) }

// Close stops Chromium.
func (s *service) Close() error {
	s.cancel()
	return s.chrome.close()
}

// Execute runs browse (goto the URL) and browse_interactive (BrowserGym's
// actions) and answers OpenHands' BrowserOutputObservation.
func (s *service) Execute(ctx context.Context, a *api.Action) (*api.Observation, error) {
	var actions string
	var axtree bool
	var url string
	switch a.Action {
	case api.ActionBrowse:
		var args api.BrowseURLArgs
		if err := json.Unmarshal(a.Args, &args); err != nil {
			return nil, httpapi.BadRequest(fmt.Errorf("browse action has the wrong arguments: %w", err))
		}
		url, axtree = args.URL, args.ReturnAXTree
		b, _ := json.Marshal(url)
		actions = "goto(" + string(b) + ")"
	case api.ActionBrowseInteractive:
		var args api.BrowseInteractiveArgs
		if err := json.Unmarshal(a.Args, &args); err != nil {
			return nil, httpapi.BadRequest(fmt.Errorf("browse_interactive action has the wrong arguments: %w", err))
		}
		actions, axtree = args.BrowserActions, args.ReturnAXTree
	default:
		return nil, fmt.Errorf("action %q: the browser does not execute it", a.Action)
	}
	timeout := DefaultActionTimeout
	if a.Timeout != nil && *a.Timeout > 0 {
		timeout = time.Duration(*a.Timeout * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := s.run(ctx, actions, axtree, axtree)
	if err != nil {
		// OpenHands' browse() on an exception: the error as content.
		msg := err.Error()
		return api.NewObservation(api.ObservationBrowse, "Visited "+url, msg, api.BrowserOutputExtras{
			URL: url, TriggerByAction: a.Action, Error: true, LastBrowserActionError: msg,
			GoalImageURLs: []string{}, OpenPagesURLs: []string{}, ActivePageIndex: -1,
			DOMObject: map[string]any{}, AXTreeObject: map[string]any{}, ExtraElementProperties: map[string]api.ElementProperties{},
		}), nil
	}
	if len(st.Downloads) > 0 {
		// OpenHands' FileDownloadObservation (one file: the first).
		return api.NewObservation(api.ObservationDownload, "Downloaded the file at location: "+st.Downloads[0],
			"Execution of the previous action "+actions+" resulted in a file download. The downloaded file is saved at location: "+st.Downloads[0],
			api.FileDownloadExtras{FilePath: st.Downloads[0]}), nil
	}
	ex := api.BrowserOutputExtras{
		URL: st.URL, TriggerByAction: a.Action, Screenshot: st.Screenshot,
		Error: st.Error != "", GoalImageURLs: []string{}, OpenPagesURLs: st.OpenPagesURLs, ActivePageIndex: st.ActivePageIndex,
		DOMObject: map[string]any{}, AXTreeObject: map[string]any{}, ExtraElementProperties: map[string]api.ElementProperties{},
		LastBrowserAction: st.LastAction, LastBrowserActionError: st.Error, FocusedElementBID: st.FocusedElementBID,
	}
	if axtree {
		ex.AXTreeObject, ex.ExtraElementProperties, ex.SetOfMarks = st.axObject, st.Elements, st.SetOfMarks
	}
	return api.NewObservation(api.ObservationBrowse, "Visited "+st.URL, st.Content, ex), nil
}

// state is a BrowserState with the accessibility tree as an object.
type state struct {
	api.BrowserState
	axObject map[string]any
}

// run parses and runs actions on the active page, then observes the
// browser. An error is one that leaves no observation (the action
// string does not parse, the browser is gone); an action's own error is
// in the state's Error, as BrowserGym's last_action_error.
func (s *service) run(ctx context.Context, actions string, axtree, props bool) (*state, error) {
	calls, err := parseActions(actions)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.syncTabs(); err != nil {
		return nil, err
	}
	var actErr error
	for _, c := range calls {
		if actErr = s.do(ctx, c); actErr != nil {
			break
		}
	}
	if err := s.syncTabs(); err != nil {
		return nil, err
	}
	st, err := s.observe(ctx, axtree, props)
	if err != nil {
		return nil, err
	}
	if st.Downloads, err = s.dl.collect(ctx); err != nil {
		return nil, err
	}
	st.LastAction = strings.TrimSpace(actions)
	if actErr != nil {
		st.Error = actErr.Error()
	}
	st.Messages = append([]string{}, s.messages...) // [] when none, never null
	return st, nil
}

// settle waits, after an action on t, for a navigation the action began
// to load (at most loadTimeout or until ctx is done).
func (s *service) settle(ctx context.Context, t *tab) {
	timer := time.NewTimer(settleDelay)
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
		return
	}
	deadline := time.Now().Add(loadTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if t.loading.Load() == 0 {
			res, err := t.p.Context(ctx).Eval(`() => document.readyState`)
			if err == nil && res.Value.Str() != "loading" {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// observe reads the active page: it marks its elements with bids, and
// gives its URL, content as markdown, screenshot, the open pages, and
// with axtree the accessibility tree.
func (s *service) observe(ctx context.Context, axtree, props bool) (*state, error) {
	t := s.cur()
	p := t.p.Context(ctx)
	s.settle(ctx, t)
	var res *proto.RuntimeRemoteObject
	var err error
	for i := 0; ; i++ {
		// A page that navigates meanwhile loses its context: try again.
		res, err = p.Eval(pageJS, "mark", map[string]any{"props": props})
		if err == nil || i == 20 || ctx.Err() != nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("read page: %w", err)
	}
	var page struct {
		URL     string                           `json:"url"`
		Title   string                           `json:"title"`
		Content string                           `json:"content"`
		Focused string                           `json:"focused"`
		Props   map[string]api.ElementProperties `json:"props"`
	}
	if err := json.Unmarshal([]byte(res.Value.JSON("", "")), &page); err != nil {
		return nil, fmt.Errorf("read page: %w", err)
	}
	st := &state{BrowserState: api.BrowserState{
		URL: page.URL, Title: page.Title, Content: page.Content, FocusedElementBID: page.Focused,
		ActivePageIndex: s.active, OpenPagesURLs: []string{}, Messages: []string{},
	}}
	if props {
		st.Elements = page.Props
	}
	png, err := p.Screenshot(false, &proto.PageCaptureScreenshot{Format: proto.PageCaptureScreenshotFormatPng})
	if err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	st.Screenshot = "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	if props {
		som, err := setOfMarks(p, png, page.Props)
		if err != nil {
			return nil, fmt.Errorf("set of marks: %w", err)
		}
		st.SetOfMarks = "data:image/png;base64," + base64.StdEncoding.EncodeToString(som)
	}
	for _, t := range s.tabs {
		info, err := t.p.Context(ctx).Info()
		if err != nil {
			return nil, fmt.Errorf("page info: %w", err)
		}
		st.OpenPagesURLs = append(st.OpenPagesURLs, info.URL)
	}
	if axtree {
		obj, text, err := axTree(p)
		if err != nil {
			return nil, err
		}
		st.axObject, st.AXTree = obj, text
	}
	return st, nil
}

// setOfMarks draws on the screenshot png a box and the bid of each
// element whose properties have set_of_marks (visible at least half and
// clickable), as BrowserGym's overlay_som, in order of bid. The drawing
// is done by the page's renderer on an OffscreenCanvas (the page's DOM is
// not touched); what comes back must decode as a PNG of the screenshot's
// size.
func setOfMarks(p *rod.Page, png []byte, props map[string]api.ElementProperties) ([]byte, error) {
	type mark struct {
		BID  string     `json:"bid"`
		BBox [4]float64 `json:"bbox"`
	}
	marks := []mark{}
	for bid, pr := range props {
		if pr.SetOfMarks && pr.BBox != nil {
			marks = append(marks, mark{BID: bid, BBox: *pr.BBox})
		}
	}
	slices.SortFunc(marks, func(a, b mark) int { return compareBIDs(a.BID, b.BID) })
	res, err := p.Eval(pageJS, "som", map[string]any{"png": base64.StdEncoding.EncodeToString(png), "marks": marks})
	if err != nil {
		return nil, err
	}
	out, err := base64.StdEncoding.DecodeString(res.Value.Str())
	if err != nil {
		return nil, fmt.Errorf("the page's drawing is not base64: %w", err)
	}
	shot, err := imagepng.DecodeConfig(bytes.NewReader(png))
	if err != nil {
		return nil, err
	}
	got, err := imagepng.DecodeConfig(bytes.NewReader(out))
	if err != nil || got.Width != shot.Width || got.Height != shot.Height {
		return nil, fmt.Errorf("the page's drawing is not a %dx%d PNG (%v)", shot.Width, shot.Height, err)
	}
	return out, nil
}

// compareBIDs orders bids as numbers where they are numbers ("2" before
// "10"), frame-prefixed ones after, by text.
func compareBIDs(a, b string) int {
	na, ea := strconv.Atoi(a)
	nb, eb := strconv.Atoi(b)
	switch {
	case ea == nil && eb == nil:
		return na - nb
	case ea == nil:
		return -1
	case eb == nil:
		return 1
	}
	return strings.Compare(a, b)
}
