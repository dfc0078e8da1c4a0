package api

// Port forwarding (/v1/ports/{port}/connect): a request with these headers
// is answered 101 Switching Protocols, after which the connection carries
// the bytes of a TCP connection to the port on the sandbox's loopback, in
// both directions, until either side closes.
const (
	// UpgradeTCP is the Upgrade header's protocol of a forwarded connection.
	UpgradeTCP = "tcp"
	// UpgradeFD is the Upgrade header's protocol of /v1/ports/{port}/fd:
	// the 101 answer carries the descriptor of the connected TCP socket
	// (SCM_RIGHTS, with the answer's first bytes), and the executor then
	// closes the request's connection.
	UpgradeFD = "fd"
	// CodeBadGateway: the port does not accept connections (nothing listens
	// on it, or it refused); answered 502 before any upgrade.
	CodeBadGateway = "bad_gateway"
	// CodeUpgradeRequired: a forwarding request without the upgrade
	// headers; answered 426.
	CodeUpgradeRequired = "upgrade_required"
)
