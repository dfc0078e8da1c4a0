// Package plugins holds the install recipes of the executor's plugins
// (jupyter, browser, vscode): what a runtime image needs inside for each, as
// data, one file per plugin. `bothy build --plugins` runs a recipe's Install
// script in a build sandbox unless its Check finds the plugin's dependencies
// already there. A recipe is part of a runtime image's lock hash: changing
// one rebuilds the images that use it.
package plugins
