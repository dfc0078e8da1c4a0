package executor_test

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/executor"
	"github.com/bothy-sandbox/bothy/plugins"
)

var (
	pathKey   = regexp.MustCompile(`^  (/[^:\s]*):\s*$`)
	methodKey = regexp.MustCompile(`^    (get|put|post|delete|patch|head|options):\s*$`)
)

// openAPIRoutes scans docs/openapi.yaml for "METHOD /path" pairs: path keys
// indented two spaces under "paths:", methods four.
func openAPIRoutes(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("../docs/openapi.yaml")
	if err != nil {
		t.Fatalf("open OpenAPI document: %v", err)
	}
	defer f.Close()
	routes := map[string]bool{}
	inPaths, path := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "paths:":
			inPaths = true
		case inPaths && line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "#"):
			inPaths = false
		case !inPaths:
		case pathKey.MatchString(line):
			path = pathKey.FindStringSubmatch(line)[1]
		case methodKey.MatchString(line) && path != "":
			routes[strings.ToUpper(methodKey.FindStringSubmatch(line)[1])+" "+path] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return routes
}

// routesServer is an executor with every plugin bothy ships enabled, whose
// native routes (Jupyter's /v1/kernels) are part of the API; none starts.
func routesServer(t *testing.T) *executor.Server {
	t.Helper()
	all, err := plugins.Select(strings.Join(plugins.Names(), ","))
	if err != nil {
		t.Fatal(err)
	}
	s, err := executor.New(executor.Options{Plugins: all})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOpenAPICoversRoutes(t *testing.T) {
	doc := openAPIRoutes(t)
	s := routesServer(t)
	defer s.Close()
	served := map[string]bool{}
	for _, rt := range s.Routes() {
		if rt.Method == "" {
			continue // a plugin's own routes under /plugins/NAME/ (every method): its API, not the executor's
		}
		key := rt.Method + " " + rt.Path
		served[key] = true
		if !doc[key] {
			t.Errorf("route %s is missing from docs/openapi.yaml", key)
		}
	}
	for key := range doc {
		if !served[key] && !servedByPlugin(key) {
			t.Errorf("docs/openapi.yaml documents %s, which is not served", key)
		}
	}
}

// servedByPlugin: a route under /plugins/NAME/ of a plugin bothy ships is
// its service's (the plugin host serves the prefix, every method); its
// bodies are checked with the plugin's own recorded answers.
func servedByPlugin(key string) bool {
	_, path, _ := strings.Cut(key, " ")
	rest, ok := strings.CutPrefix(path, "/plugins/")
	if !ok {
		return false
	}
	name, _, _ := strings.Cut(rest, "/")
	return slices.Contains(plugins.Names(), name)
}

func TestAPIDocCoversRoutes(t *testing.T) {
	b, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatalf("read API doc: %v", err)
	}
	doc := string(b)
	if !strings.Contains(doc, "curl --unix-socket") {
		t.Error("docs/api.md has no curl --unix-socket example")
	}
	s := routesServer(t)
	defer s.Close()
	for _, rt := range s.Routes() {
		if rt.Method == "" {
			continue // a plugin's own routes
		}
		if !strings.Contains(doc, "`"+rt.Method+" "+rt.Path+"`") {
			t.Errorf("route `%s %s` is not documented in docs/api.md", rt.Method, rt.Path)
		}
	}
}
