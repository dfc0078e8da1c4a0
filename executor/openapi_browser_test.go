package executor_test

import (
	"encoding/json"
	"os"
	"testing"
)

// The browser plugin's bodies against docs/openapi.yaml: its routes and
// the browse observations, as a real Chromium in a real sandbox answered
// them (plugins/browser's TestBrowserInSandbox records them with
// BOTHY_BROWSER_EXCHANGES=FILE; screenshots there are made tiny), each
// checked as TestOpenAPISchemas checks the executor's own, renaming
// included.
func TestOpenAPIBrowserBodies(t *testing.T) {
	doc := loadOpenAPIFile(t, "../docs/openapi.yaml")
	b, err := os.ReadFile("testdata/browser-exchanges.json")
	if err != nil {
		t.Fatal(err)
	}
	var recorded []struct {
		Method   string `json:"method"`
		Path     string `json:"path"`
		ReqBody  string `json:"req_body"`
		Status   int    `json:"status"`
		RespType string `json:"resp_type"`
		RespBody []byte `json:"resp_body"`
	}
	if err := json.Unmarshal(b, &recorded); err != nil {
		t.Fatal(err)
	}
	var exchanges []*exchange
	routes := map[string]bool{}
	for _, r := range recorded {
		ex := &exchange{method: r.Method, path: r.Path, status: r.Status, respType: r.RespType, respBody: r.RespBody}
		if r.ReqBody != "" {
			ex.reqType, ex.reqBody = "application/json", []byte(r.ReqBody)
		}
		exchanges = append(exchanges, ex)
		if r.Status == 200 {
			routes[r.Method+" "+r.Path] = true
		}
	}
	for _, p := range checkExchanges(doc, exchanges) {
		t.Error(p)
	}
	for _, rt := range []string{"POST /execute_action", "POST /v1/browser/navigate", "POST /v1/browser/actions", "GET /v1/browser/screenshot"} {
		if !routes[rt] {
			t.Errorf("no successful %s recorded", rt)
		}
	}
}
