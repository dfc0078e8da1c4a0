package plugins

// VSCode gives the sandbox a VS Code server (code-server, installed with npm
// from the npm registry on top of Debian's Node.js); the executor serves its
// connection token on /vscode/connection_token.
var VSCode = register(Recipe{
	Name:        "vscode",
	Description: "VS Code in the browser (code-server from npm, on Debian's nodejs)",
	Packages:    []string{"nodejs", "npm", "git"},
	Run:         []string{"npm install --global --unsafe-perm --no-audit --no-fund code-server@4", "npm cache clean --force"},
	Check:       "command -v code-server >/dev/null",
})
