// Package api holds the wire types of the bothy executor's API: the native
// API (version v1: processes, bash sessions, files, editor, info), the
// OpenHands dialect (actions, observations, server info), streamed events,
// the JSON error envelope, and signal name conversion.
//
// The server (package executor), the Go client (package executor/client)
// and the tests all use these types, so the JSON on the wire is defined in
// one place. This package imports no implementation: the file and editor
// types mirror the results of executor/files and executor/editor, and the
// services convert at their boundary, so no change in a library can change
// the wire format. docs/api.md describes every route; docs/openapi.yaml
// lists them.
//
// Binary data convention: every field that carries process output or input
// has a UTF-8 text form and a base64 form. Text goes in the plain field
// ("data", "stdout", "stdin"); bytes that are not valid UTF-8 go, base64
// encoded, in the matching "_b64"/"b64" field and the text field is empty.
package api
