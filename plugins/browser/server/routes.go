package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/go-rod/rod/lib/proto"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

// maxBody caps a native route's request body.
const maxBody = 1 << 20

// routes are the plugin's routes: the native API's /v1/browser/ ones
// (Routes) and the same under /plugins/browser/ (prefix stripped):
// POST navigate, POST action or actions (both answer a BrowserState) and
// GET screenshot (the active page as PNG).
func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(method string, paths []string, h http.HandlerFunc) {
		for _, p := range paths {
			mux.HandleFunc(method+" "+p, h)
		}
	}
	handle(http.MethodPost, []string{"/navigate", "/v1/browser/navigate"}, func(w http.ResponseWriter, r *http.Request) {
		var req api.BrowserNavigateRequest
		if err := httpapi.Decode(http.MaxBytesReader(w, r.Body, maxBody), &req); err != nil {
			httpapi.Error(w, err)
			return
		}
		if strings.TrimSpace(req.URL) == "" {
			httpapi.Error(w, httpapi.BadRequest(errors.New(`"url" is required`)))
			return
		}
		b, _ := json.Marshal(req.URL)
		s.serveActions(w, r, "goto("+string(b)+")", req.AXTree, req.Timeout)
	})
	handle(http.MethodPost, []string{"/action", "/actions", "/v1/browser/actions"}, func(w http.ResponseWriter, r *http.Request) {
		var req api.BrowserActionRequest
		if err := httpapi.Decode(http.MaxBytesReader(w, r.Body, maxBody), &req); err != nil {
			httpapi.Error(w, err)
			return
		}
		s.serveActions(w, r, req.Actions, req.AXTree, req.Timeout)
	})
	handle(http.MethodGet, []string{"/screenshot", "/v1/browser/screenshot"}, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.syncTabs(); err != nil {
			httpapi.Error(w, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), DefaultActionTimeout)
		defer cancel()
		png, err := s.cur().p.Context(ctx).Screenshot(false, &proto.PageCaptureScreenshot{Format: proto.PageCaptureScreenshotFormatPng})
		if err != nil {
			httpapi.Error(w, err)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(png)
	})
	return mux
}

// serveActions runs actions and answers the browser's state; an action
// string that does not parse is a bad request.
func (s *service) serveActions(w http.ResponseWriter, r *http.Request, actions string, axtree bool, timeout float64) {
	if timeout < 0 || timeout > 1e6 || timeout != timeout {
		httpapi.Error(w, httpapi.BadRequest(errors.New("timeout out of range")))
		return
	}
	if _, err := parseActions(actions); err != nil {
		httpapi.Error(w, httpapi.BadRequest(err))
		return
	}
	d := DefaultActionTimeout
	if timeout > 0 {
		d = time.Duration(timeout * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	defer cancel()
	st, err := s.run(ctx, actions, axtree, axtree)
	if err != nil {
		httpapi.Error(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, &st.BrowserState)
}

// decodePNG is the PNG of a screenshot data URL (for tests).
func decodePNG(dataURL string) ([]byte, error) {
	b64, ok := strings.CutPrefix(dataURL, "data:image/png;base64,")
	if !ok {
		return nil, errors.New("not a PNG data URL")
	}
	return base64.StdEncoding.DecodeString(b64)
}
