#!/bin/sh
# vscode-lite-hook.sh ROOTFS: mmdebstrap's customize hook for the VS Code
# plugin's small test image (make test-images, vscode-lite): code-server
# 4.89.1 from the npm registry on Debian's nodejs (in ROOTFS already),
# without compiling anything, so that the image takes about a minute to
# make instead of half an hour (docs/plugins.md, VS Code).
#
# - npm is the registry's own tarball (its sha512 checked), run with the
#   image's node and removed afterwards: Debian's npm package alone pulls
#   in hundreds of node-* packages.
# - code-server is installed with --ignore-scripts: its postinstall, which
#   installs VS Code's server modules (lib/vscode/node_modules) and
#   compiles their native parts, does not run. code-server itself starts,
#   answers /healthz and its login form; its workbench page needs those
#   modules and never answers (make test-vscode's image has them).
# - argon2 (code-server's password and session hashing) is forced to
#   0.41.1, whose npm tarball bundles prebuilt binaries (prebuilds/
#   linux-x64, loaded by node-gyp-build); code-server's ^0.31.1 would
#   download them from GitHub or compile them at install.
#
# Run on the host, which fetches npm with its own trust store; the install
# runs in ROOTFS (chroot) with the host's CA bundle added to node's
# (NODE_EXTRA_CA_CERTS), for a host behind a TLS-intercepting proxy.
set -eu
r=$1
npm_version=10.9.2 # the last npm 10, which runs on Node.js 18 (^18.17.0)
npm_sha512=8ab88f10f224a0c614cb717a7f7c30499014f77134120e9c1f0211ea3cf3397592cbe483feb38e0c4b3be1c54e347292c76a1b5edb94a3289d5448484ab8ac81
ca=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
tmp=/tmp/bothy-vscode-lite

mkdir -p "$r$tmp/npm" "$r$tmp/home" "$r/opt/code-server"
curl -fsSL -o "$r$tmp/npm.tgz" "https://registry.npmjs.org/npm/-/npm-$npm_version.tgz"
echo "$npm_sha512  $r$tmp/npm.tgz" | sha512sum --check --quiet
tar -xzf "$r$tmp/npm.tgz" -C "$r$tmp/npm" --strip-components=1
cp "$ca" "$r$tmp/ca.crt"
cat >"$r/opt/code-server/package.json" <<'EOF'
{
  "private": true,
  "dependencies": { "code-server": "4.89.1" },
  "overrides": { "argon2": "0.41.1" }
}
EOF
chroot "$r" env HOME=$tmp/home NODE_EXTRA_CA_CERTS=$tmp/ca.crt \
	node $tmp/npm/bin/npm-cli.js install --prefix /opt/code-server \
	--ignore-scripts --omit=dev --no-audit --no-fund --no-update-notifier --cache $tmp/home/cache
ln -s /opt/code-server/node_modules/code-server/out/node/entry.js "$r/usr/local/bin/code-server"
rm -rf "${r:?}$tmp"
# What the test relies on: the prebuilt argon2 code-server loads at start.
test -f "$r/opt/code-server/node_modules/argon2/prebuilds/linux-x64/argon2.glibc.node"
