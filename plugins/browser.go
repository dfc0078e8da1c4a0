package plugins

// Browser gives the executor a headless Chromium for OpenHands' browse and
// browse_interactive actions, from Debian's packages.
var Browser = register(Recipe{
	Name:        "browser",
	Description: "headless Chromium (browse, browse_interactive actions)",
	Packages:    []string{"chromium", "fonts-liberation"},
	Check:       "command -v chromium >/dev/null",
})
