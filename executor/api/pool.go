package api

// PoolClaimPath is the one route, besides GET /alive, that an executor
// started in pool mode (bothy-executor --pool) answers before it is
// claimed; it answers it once.
const PoolClaimPath = "/v1/pool/claim"

// PoolClaim is the body of POST /v1/pool/claim: what a pooled sandbox is
// given when it is claimed. The request carries the sandbox's pre-claim
// key in X-Session-API-Key; from the answer on, the executor requires
// APIKey instead, and the pre-claim key opens nothing.
type PoolClaim struct {
	// APIKey is the key the claimed sandbox requires on every route but
	// /alive; it must not be empty.
	APIKey string `json:"api_key"`
	// Env is added to the environment of every process the executor
	// starts (KEY=VALUE; a key already set is replaced).
	Env []string `json:"env,omitempty"`
	// Workdir, when set, is an absolute path that becomes the executor's
	// working directory, and so that of every session and command; it is
	// made if missing.
	Workdir string `json:"workdir,omitempty"`
}
