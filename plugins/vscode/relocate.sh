# code-server's npm postinstall runs `npm install` in lib/vscode (whose own
# postinstall runs it in lib/vscode/extensions) with the environment of
# the global install, npm_config_global=true included: npm 9 installs
# those directories as global packages (vscode-reh, vscode-extensions)
# instead of filling their node_modules, and VS Code's server then fails
# to load its modules on the first workbench request, which never
# answers. Move their node_modules where code-server loads them from.
set -eu
g=$(npm root -g)
v=$g/code-server/lib/vscode
if [ -d "$g/vscode-reh/node_modules" ] && [ ! -e "$v/node_modules" ]; then
	mv "$g/vscode-reh/node_modules" "$v/node_modules"
fi
if [ -d "$g/vscode-extensions/node_modules" ] && [ ! -e "$v/extensions/node_modules" ]; then
	mv "$g/vscode-extensions/node_modules" "$v/extensions/node_modules"
fi
for p in vscode-reh vscode-extensions; do
	if grep -qs "\"name\": \"$p\"" "$g/$p/package.json"; then
		rm -rf "${g:?}/$p"
	fi
done
test -d "$v/node_modules/@microsoft/1ds-core-js"
test -d "$v/extensions/node_modules/typescript"
