package httpapi

import "net/http"

// Route is one entry of the API. A service lists its routes; the server
// adds auth and activity tracking and puts them in its one route table.
type Route struct {
	// Method is the HTTP method; empty matches every method (a plugin's
	// routes under its prefix).
	Method string
	// Path is a net/http ServeMux pattern path, e.g. /v1/processes/{id}.
	Path   string
	Public bool // answered without the API key
	Quiet  bool // does not count as activity for idle time
	// Files: the handler works in blocking file system calls, and waits
	// its turn among the server's (budget.Calls).
	Files   bool
	Summary string
	Handler http.HandlerFunc
}
