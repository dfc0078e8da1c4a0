// Package builtin imports every plugin bothy ships, so that each registers
// itself with package plugins: a binary that imports builtin (bothy for
// `bothy build --plugins`, bothy-executor for --plugins) knows them all.
// Adding a plugin is its own package plus one line here.
package builtin

import (
	_ "github.com/bothy-sandbox/bothy/plugins/browser"
	_ "github.com/bothy-sandbox/bothy/plugins/jupyter"
	_ "github.com/bothy-sandbox/bothy/plugins/vscode"
)
