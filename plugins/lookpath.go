package plugins

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// LookPath finds an executable named file in the directories of the PATH
// in environ (the sandbox's, not the executor's own; a default PATH when it
// sets none), for a plugin's service looking for its program.
func LookPath(environ []string, file string) (string, error) {
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, file)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}
