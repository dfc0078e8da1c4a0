package fileserver

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/bothy-sandbox/bothy/executor/files"
	"github.com/bothy-sandbox/bothy/executor/httpapi"
)

// fileQuery is the query of the /v1/files routes, parsed and validated.
type fileQuery struct {
	path      string
	start     int // read: first line, 1-based
	end       int // read: last line, inclusive; -1 = end of file
	maxBytes  int64
	mode      fs.FileMode // write, upload: 0 = keep / default
	owner     *files.Owner
	user      string // write, upload: NAME|UID[:GROUP|GID] owning what is created
	append    bool
	exclusive bool
	recursive bool
	maxDepth  int
	hidden    bool // list: include hidden entries (default true)
	extract   bool
	follow    bool // stat: describe a final symlink's target
	format    files.ArchiveFormat
}

// parseFileQuery parses the query of a /v1/files route; allowed names the
// parameters the route takes (path is always required). Unknown parameters
// are refused, as unknown JSON fields are.
func parseFileQuery(q url.Values, allowed ...string) (fileQuery, error) {
	fq := fileQuery{end: -1, hidden: true}
	for k, v := range q {
		if k != "path" && !slices.Contains(allowed, k) {
			return fq, httpapi.BadRequest(fmt.Errorf("unknown query parameter %q", k))
		}
		if len(v) != 1 {
			return fq, httpapi.BadRequest(fmt.Errorf("query parameter %q given %d times", k, len(v)))
		}
	}
	fq.path = q.Get("path")
	if fq.path == "" {
		return fq, httpapi.BadRequest(errors.New("query parameter path is required"))
	}
	if !strings.HasPrefix(fq.path, "/") || strings.IndexByte(fq.path, 0) >= 0 {
		return fq, httpapi.BadRequest(fmt.Errorf("path %q must be absolute", fq.path))
	}
	p := params{q: q}
	fq.start = p.int("start", 1, 1)
	if fq.end = p.int("end", -1, -1); fq.end == 0 {
		fq.end = -1
	}
	fq.maxDepth = p.int("max_depth", 0, 0)
	fq.maxBytes = p.size("max_bytes")
	fq.mode = p.mode("mode")
	fq.owner = p.owner("uid", "gid")
	fq.user = q.Get("user")
	if p.err == nil && fq.user != "" && fq.owner != nil {
		p.fail("user and uid/gid are exclusive")
	}
	fq.append, fq.exclusive = p.bool("append", false), p.bool("exclusive", false)
	fq.recursive, fq.hidden, fq.extract = p.bool("recursive", false), p.bool("hidden", true), p.bool("extract", false)
	fq.follow = p.bool("follow", false)
	fq.format = p.format("format")
	if p.err == nil && fq.append && fq.exclusive {
		p.fail("append and exclusive are exclusive")
	}
	return fq, p.err
}

// params reads query parameters; the first invalid one is kept in err and
// the later reads do nothing.
type params struct {
	q   url.Values
	err error
}

func (p *params) fail(format string, a ...any) {
	if p.err == nil {
		p.err = httpapi.BadRequest(fmt.Errorf(format, a...))
	}
}

// get returns the parameter name, "" when it is absent or an earlier one
// was invalid.
func (p *params) get(name string) string {
	if p.err != nil {
		return ""
	}
	return p.q.Get(name)
}

// int reads an integer of at least min, def when absent.
func (p *params) int(name string, min, def int) int {
	v := p.get(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		p.fail("%s %q is not an integer ≥ %d", name, v, min)
	}
	return n
}

// size reads a positive number of bytes, 0 when absent.
func (p *params) size(name string) int64 {
	v := p.get(name)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		p.fail("%s %q is not a positive integer", name, v)
	}
	return n
}

// mode reads octal permission bits, 0 when absent.
func (p *params) mode(name string) fs.FileMode {
	v := p.get(name)
	if v == "" {
		return 0
	}
	m, err := strconv.ParseUint(v, 8, 32)
	if err != nil || m > 0o7777 {
		p.fail("%s %q is not octal permission bits (0644)", name, v)
	}
	return fs.FileMode(m)
}

// owner reads a numeric uid and gid, which go together; nil when absent.
func (p *params) owner(uidName, gidName string) *files.Owner {
	uid, gid := p.get(uidName), p.get(gidName)
	if (uid == "") != (gid == "") {
		p.fail("%s and %s go together", uidName, gidName)
	}
	if uid == "" || gid == "" {
		return nil
	}
	u, err1 := strconv.ParseUint(uid, 10, 31)
	g, err2 := strconv.ParseUint(gid, 10, 31)
	if err1 != nil || err2 != nil {
		p.fail("%s %q and %s %q must be numeric ids", uidName, uid, gidName, gid)
		return nil
	}
	return &files.Owner{UID: int(u), GID: int(g)}
}

// bool reads a boolean as FastAPI does, def when absent.
func (p *params) bool(name string, def bool) bool {
	v := p.get(name)
	if v == "" {
		return def
	}
	b, ok := httpapi.ParseBool(v)
	if !ok {
		p.fail("%s %q is not a boolean", name, v)
	}
	return b
}

// format reads an archive format, FormatAuto when absent.
func (p *params) format(name string) files.ArchiveFormat {
	switch f := files.ArchiveFormat(p.get(name)); f {
	case files.FormatAuto, files.FormatZip, files.FormatTar, files.FormatTarGz:
		return f
	default:
		p.fail("%s %q is not zip, tar or tar.gz", name, f)
		return files.FormatAuto
	}
}
