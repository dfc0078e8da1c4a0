// Package httpapi is what every service of the executor shares to speak
// HTTP: the Route a service declares, JSON request bodies read under the
// request memory budget, the one writer of JSON answers and of error
// bodies, and the mapping of errors to statuses (StatusError for a
// service's own errors; the sentinels of executor/files, executor/bash and
// executor/editor), plus the multipart and query helpers the file routes
// share.
package httpapi
