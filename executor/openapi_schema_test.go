package executor_test

// The bodies of the API against docs/openapi.yaml: the requests the tests
// send and the answers the executor gives, recorded on the way (recorder),
// are each checked against the schema of their route, status and media
// type by a validator of the JSON Schema subset the document uses.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// openAPI is docs/openapi.yaml, parsed.
type openAPI struct {
	doc   map[string]any
	paths []openAPIPath
}

type openAPIPath struct {
	template string
	re       *regexp.Regexp
	params   int
	item     map[string]any
}

// loadOpenAPIFile parses an OpenAPI document.
func loadOpenAPIFile(t testing.TB, name string) *openAPI {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("read OpenAPI document: %v", err)
	}
	return parseOpenAPI(t, b)
}

func parseOpenAPI(t testing.TB, b []byte) *openAPI {
	t.Helper()
	var raw any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatalf("parse OpenAPI document: %v", err)
	}
	doc, ok := plainYAML(raw).(map[string]any)
	if !ok {
		t.Fatal("OpenAPI document is not a mapping")
	}
	o := &openAPI{doc: doc}
	paths, _ := doc["paths"].(map[string]any)
	for tmpl, item := range paths {
		re := "^" + regexp.MustCompile(`\\\{[^}]*\\\}`).ReplaceAllString(regexp.QuoteMeta(tmpl), `[^/]+`) + "$"
		o.paths = append(o.paths, openAPIPath{
			template: tmpl, re: regexp.MustCompile(re), params: strings.Count(tmpl, "{"),
			item: item.(map[string]any),
		})
	}
	// Literal paths before templated ones.
	sort.Slice(o.paths, func(i, j int) bool {
		if o.paths[i].params != o.paths[j].params {
			return o.paths[i].params < o.paths[j].params
		}
		return o.paths[i].template < o.paths[j].template
	})
	return o
}

// plainYAML turns what yaml decodes into JSON's shapes: string-keyed
// maps, []any, and numbers as float64 or int.
func plainYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = plainYAML(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = plainYAML(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = plainYAML(e)
		}
		return x
	}
	return v
}

// lookup returns what a local reference ("#/components/schemas/X")
// points at.
func (o *openAPI) lookup(ref string) (map[string]any, error) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("reference %q is not local", ref)
	}
	var cur any = o.doc
	for _, tok := range strings.Split(p, "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("reference %q: %q is not in a mapping", ref, tok)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("reference %q: no %q", ref, tok)
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("reference %q is not a mapping", ref)
	}
	return m, nil
}

// deref follows $ref until a mapping without one.
func (o *openAPI) deref(m map[string]any) (map[string]any, error) {
	for range 32 {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, nil
		}
		var err error
		if m, err = o.lookup(ref); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("reference loop")
}

// openAPIOp is the operation that serves a request.
type openAPIOp struct {
	template string
	op       map[string]any
	query    map[string]bool // documented query parameters
	secured  bool            // needs the API key (403 without it)
}

// operation finds the operation of method on path; nil when none.
func (o *openAPI) operation(method, path string) (*openAPIOp, error) {
	for _, p := range o.paths {
		if !p.re.MatchString(path) {
			continue
		}
		op, ok := p.item[strings.ToLower(method)].(map[string]any)
		if !ok {
			return nil, nil
		}
		res := &openAPIOp{template: p.template, op: op, query: map[string]bool{}, secured: true}
		if sec, ok := op["security"].([]any); ok && len(sec) == 0 {
			res.secured = false
		}
		for _, list := range []any{p.item["parameters"], op["parameters"]} {
			params, _ := list.([]any)
			for _, prm := range params {
				pm, err := o.deref(prm.(map[string]any))
				if err != nil {
					return nil, err
				}
				if pm["in"] == "query" {
					res.query[pm["name"].(string)] = true
				}
			}
		}
		return res, nil
	}
	return nil, nil
}

// schemaKeywords are the keywords the validator understands; a schema
// that uses another fails, so that none is silently ignored.
var schemaKeywords = map[string]bool{
	"$ref": true, "type": true, "nullable": true, "enum": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true, "minItems": true, "maxItems": true, "minimum": true,
	"pattern": true, "format": true, "oneOf": true, "discriminator": true,
	"description": true, "example": true, "default": true,
}

var schemaFormats = map[string]bool{"date-time": true, "byte": true, "binary": true, "int64": true}

// schemaValidator checks JSON values (decoded with UseNumber) against the
// document's schemas.
type schemaValidator struct {
	api *openAPI
	// objects records the schema each object matched, by JSON pointer
	// (for the rename check).
	objects map[string]map[string]any
}

func newValidator(o *openAPI) *schemaValidator {
	return &schemaValidator{api: o, objects: map[string]map[string]any{}}
}

// validate checks v against schema s; at is v's JSON pointer. It returns
// one line per problem.
func (sv *schemaValidator) validate(s map[string]any, v any, at string) []string {
	if ref, ok := s["$ref"].(string); ok {
		for k := range s {
			if k != "$ref" && k != "description" {
				return []string{fmt.Sprintf("%s: schema has %q beside $ref (ignored by OpenAPI 3.0)", at, k)}
			}
		}
		target, err := sv.api.lookup(ref)
		if err != nil {
			return []string{at + ": " + err.Error()}
		}
		return sv.validate(target, v, at)
	}
	for k := range s {
		if !schemaKeywords[k] {
			return []string{fmt.Sprintf("%s: schema keyword %q is not supported by the test's validator", at, k)}
		}
	}
	if v == nil {
		_, typed := s["type"]
		_, variants := s["oneOf"]
		if s["nullable"] == true || !typed && !variants {
			return nil
		}
		return []string{at + ": null is not allowed (nullable is not set)"}
	}
	if variants, ok := s["oneOf"].([]any); ok {
		return sv.oneOf(s, variants, v, at)
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
			}
		}
		if !found {
			return []string{fmt.Sprintf("%s: %v is not one of %v", at, v, enum)}
		}
	}
	if f, ok := s["format"].(string); ok && !schemaFormats[f] {
		return []string{fmt.Sprintf("%s: format %q is not supported by the test's validator", at, f)}
	}
	typ, _ := s["type"].(string)
	switch typ {
	case "":
		if _, ok := s["properties"]; ok {
			return []string{at + ": schema has properties but no type"}
		}
		return nil
	case "object":
		return sv.object(s, v, at)
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %s where an array is expected", at, jsonKind(v))}
		}
		var errs []string
		if n, ok := number(s["minItems"]); ok && float64(len(arr)) < n {
			errs = append(errs, fmt.Sprintf("%s: %d items, fewer than %v", at, len(arr), n))
		}
		if n, ok := number(s["maxItems"]); ok && float64(len(arr)) > n {
			errs = append(errs, fmt.Sprintf("%s: %d items, more than %v", at, len(arr), n))
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range arr {
				errs = append(errs, sv.validate(items, e, at+"/"+strconv.Itoa(i))...)
			}
		} else {
			errs = append(errs, at+": array schema without items")
		}
		return errs
	case "string":
		str, ok := v.(string)
		if !ok {
			return []string{fmt.Sprintf("%s: %s where a string is expected", at, jsonKind(v))}
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			return []string{fmt.Sprintf("%s: %q does not match %s", at, str, p)}
		}
		switch s["format"] {
		case "date-time":
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				return []string{fmt.Sprintf("%s: %q is not a date-time: %v", at, str, err)}
			}
		case "byte":
			if _, err := base64.StdEncoding.DecodeString(str); err != nil {
				return []string{fmt.Sprintf("%s: %q is not base64: %v", at, str, err)}
			}
		}
		return nil
	case "integer", "number":
		n, ok := v.(json.Number)
		if !ok {
			return []string{fmt.Sprintf("%s: %s where a number is expected", at, jsonKind(v))}
		}
		f, err := n.Float64()
		if err != nil {
			return []string{fmt.Sprintf("%s: %s: %v", at, n, err)}
		}
		if typ == "integer" && strings.ContainsAny(n.String(), ".eE") {
			return []string{fmt.Sprintf("%s: %s where an integer is expected", at, n)}
		}
		if m, ok := number(s["minimum"]); ok && f < m {
			return []string{fmt.Sprintf("%s: %s is below the minimum %v", at, n, m)}
		}
		return nil
	case "boolean":
		if _, ok := v.(bool); !ok {
			return []string{fmt.Sprintf("%s: %s where a boolean is expected", at, jsonKind(v))}
		}
		return nil
	}
	return []string{fmt.Sprintf("%s: unknown type %q", at, typ)}
}

func (sv *schemaValidator) object(s map[string]any, v any, at string) []string {
	obj, ok := v.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s: %s where an object is expected", at, jsonKind(v))}
	}
	sv.objects[at] = s
	var errs []string
	props, _ := s["properties"].(map[string]any)
	req, _ := s["required"].([]any)
	for _, r := range req {
		if _, ok := obj[r.(string)]; !ok {
			errs = append(errs, fmt.Sprintf("%s: required property %q is missing", at, r))
		}
		if _, ok := props[r.(string)]; !ok {
			errs = append(errs, fmt.Sprintf("%s: required property %q is not among the properties", at, r))
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		child := at + "/" + pointerEscape(k)
		if ps, ok := props[k].(map[string]any); ok {
			errs = append(errs, sv.validate(ps, obj[k], child)...)
			continue
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if !ap {
				errs = append(errs, fmt.Sprintf("%s: property %q is not in the schema", at, k))
			}
		case map[string]any:
			errs = append(errs, sv.validate(ap, obj[k], child)...)
		}
	}
	return errs
}

// oneOf checks v against exactly one variant: the one its discriminator
// names, or the only one it matches.
func (sv *schemaValidator) oneOf(s map[string]any, variants []any, v any, at string) []string {
	if d, ok := s["discriminator"].(map[string]any); ok {
		obj, ok := v.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %s where an object is expected", at, jsonKind(v))}
		}
		name, _ := d["propertyName"].(string)
		val, ok := obj[name].(string)
		if !ok {
			return []string{fmt.Sprintf("%s: discriminator %q is missing or not a string", at, name)}
		}
		mapping, _ := d["mapping"].(map[string]any)
		ref, ok := mapping[val].(string)
		if !ok {
			return []string{fmt.Sprintf("%s: %s %q is not in the discriminator's mapping", at, name, val)}
		}
		return sv.validate(map[string]any{"$ref": ref}, v, at)
	}
	var matched []map[string]map[string]any
	var all []string
	for i, variant := range variants {
		sub := newValidator(sv.api)
		errs := sub.validate(variant.(map[string]any), v, at)
		if len(errs) == 0 {
			matched = append(matched, sub.objects)
		}
		for _, e := range errs {
			all = append(all, fmt.Sprintf("variant %d: %s", i, e))
		}
	}
	switch len(matched) {
	case 1:
		for k, o := range matched[0] {
			sv.objects[k] = o
		}
		return nil
	case 0:
		return append([]string{at + ": matches none of oneOf"}, all...)
	}
	return []string{fmt.Sprintf("%s: matches %d variants of oneOf", at, len(matched))}
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// decodeJSONValue decodes exactly one JSON value, numbers as json.Number.
func decodeJSONValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// mediaMatch finds the entry of a content map for a media type: exact,
// then type/*, then */*.
func mediaMatch(content map[string]any, mt string) (map[string]any, bool) {
	for _, k := range []string{mt, strings.SplitN(mt, "/", 2)[0] + "/*", "*/*"} {
		if m, ok := content[k].(map[string]any); ok {
			return m, true
		}
	}
	return nil, false
}

// jsonBody is one JSON document of an exchange, with the schema it must
// match.
type jsonBody struct {
	what   string // "request", "response", "response line 3"
	schema map[string]any
	value  any
}

// contractCheck checks recorded exchanges against the document.
type contractCheck struct {
	api *openAPI
}

// errorStatus is the status each error code goes with (docs/api.md).
var errorStatus = map[string]int{
	api.CodeBadRequest: 400, api.CodeStartFailed: 400, api.CodeToolError: 400, api.CodeForbidden: 403,
	api.CodeNotFound: 404, api.CodeMethodNotAllowed: 405, api.CodeConflict: 409, api.CodeTooLarge: 413,
	api.CodeInternal: 500, api.CodeUnsupported: 501, api.CodeUnavailable: 503,
	api.CodeUpgradeRequired: 426, api.CodeBadGateway: 502,
}

const errorResponseRef = "#/components/responses/Error"

// check returns the problems of one exchange and its JSON bodies.
func (cc *contractCheck) check(ex *exchange) ([]string, []jsonBody) {
	var problems []string
	var bodies []jsonBody
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	op, err := cc.api.operation(ex.method, ex.path)
	if err != nil {
		fail("%v", err)
		return problems, nil
	}
	if op == nil {
		// Not a documented operation: only the JSON 404 and 405 may
		// answer it, in the one error shape.
		if ex.status != 404 && ex.status != 405 {
			fail("undocumented operation answered %d", ex.status)
		}
		if !ex.invalid {
			fail("the test sent an undocumented request without marking it invalid")
		}
		p, b := cc.errorBody(ex)
		return append(problems, p...), b
	}

	// The request.
	if !ex.invalid {
		for k := range ex.query {
			if !op.query[k] {
				fail("query parameter %q is not documented for %s %s", k, ex.method, op.template)
			}
		}
		rb, _ := op.op["requestBody"].(map[string]any)
		switch {
		case len(ex.reqBody) > 0 && rb == nil:
			fail("a body was sent, but %s %s documents none", ex.method, op.template)
		case len(ex.reqBody) > 0:
			rb, err := cc.api.deref(rb)
			if err != nil {
				fail("%v", err)
				break
			}
			content, _ := rb["content"].(map[string]any)
			mt, ok := mediaMatch(content, ex.reqType)
			if !ok {
				fail("request media type %q is not documented for %s %s", ex.reqType, ex.method, op.template)
				break
			}
			if ex.reqType == "application/json" {
				v, err := decodeJSONValue(ex.reqBody)
				if err != nil {
					fail("request body is not JSON: %v", err)
					break
				}
				sch, _ := mt["schema"].(map[string]any)
				bodies = append(bodies, jsonBody{"request", sch, v})
			}
		case rb != nil && rb["required"] == true:
			fail("%s %s requires a body; none was sent", ex.method, op.template)
		}
	}

	// The answer.
	code := strconv.Itoa(ex.status)
	resp, _ := op.op["responses"].(map[string]any)
	r, ok := resp[code].(map[string]any)
	if !ok && ex.status == 403 && op.secured {
		r, ok = map[string]any{"$ref": errorResponseRef}, true
	}
	if !ok {
		fail("status %d is not documented for %s %s", ex.status, ex.method, op.template)
		if ex.status >= 400 {
			p, b := cc.errorBody(ex)
			problems = append(problems, p...)
			bodies = append(bodies, b...)
		}
		return problems, bodies
	}
	if ex.status >= 400 {
		if r["$ref"] != errorResponseRef {
			fail("status %d of %s %s is not the shared error response %s", ex.status, ex.method, op.template, errorResponseRef)
		}
		p, b := cc.errorBody(ex)
		return append(problems, p...), append(bodies, b...)
	}
	if ex.invalid {
		fail("a request marked invalid was answered %d", ex.status)
	}
	r, err = cc.api.deref(r)
	if err != nil {
		fail("%v", err)
		return problems, bodies
	}
	content, _ := r["content"].(map[string]any)
	if len(content) == 0 {
		if len(ex.respBody) > 0 {
			fail("status %d documents no body, %d bytes came", ex.status, len(ex.respBody))
		}
		return problems, bodies
	}
	mt, ok := mediaMatch(content, ex.respType)
	if !ok {
		fail("response media type %q is not documented for %d of %s %s", ex.respType, ex.status, ex.method, op.template)
		return problems, bodies
	}
	sch, _ := mt["schema"].(map[string]any)
	switch ex.respType {
	case "application/json":
		v, err := decodeJSONValue(ex.respBody)
		if err != nil {
			fail("response is not JSON: %v", err)
			break
		}
		bodies = append(bodies, jsonBody{"response", sch, v})
	case "application/x-ndjson":
		lines, p := ndjsonLines(ex.respBody, ex.aborted)
		problems = append(problems, p...)
		for i, v := range lines {
			bodies = append(bodies, jsonBody{fmt.Sprintf("response line %d", i+1), sch, v})
		}
	case "text/event-stream":
		// Each event's data is an item of the NDJSON form.
		nd, ok := content["application/x-ndjson"].(map[string]any)
		if !ok {
			fail("text/event-stream is documented without its application/x-ndjson form")
			break
		}
		events, p := sseEvents(ex.respBody)
		problems = append(problems, p...)
		for i, v := range events {
			bodies = append(bodies, jsonBody{fmt.Sprintf("response event %d", i+1), nd["schema"].(map[string]any), v})
		}
	}
	return problems, bodies
}

// errorBody checks an error answer: the one JSON shape (ErrorBody), its
// code going with the status, detail repeating the message.
func (cc *contractCheck) errorBody(ex *exchange) ([]string, []jsonBody) {
	if ex.respType != "application/json" {
		return []string{fmt.Sprintf("error answer of type %q, not application/json", ex.respType)}, nil
	}
	v, err := decodeJSONValue(ex.respBody)
	if err != nil {
		return []string{fmt.Sprintf("error answer is not JSON: %v", err)}, nil
	}
	var problems []string
	var eb api.ErrorBody
	json.Unmarshal(ex.respBody, &eb)
	switch {
	case eb.Error == nil:
		problems = append(problems, "error answer without error")
	case errorStatus[eb.Error.Code] != ex.status:
		problems = append(problems, fmt.Sprintf("error code %q answered with status %d", eb.Error.Code, ex.status))
	case eb.Detail != eb.Error.Message:
		problems = append(problems, fmt.Sprintf("detail %q is not the message %q", eb.Detail, eb.Error.Message))
	}
	return problems, []jsonBody{{"error response", map[string]any{"$ref": "#/components/schemas/ErrorBody"}, v}}
}

// ndjsonLines splits an NDJSON body; a last line without its newline is
// a problem unless the handler cut the connection.
func ndjsonLines(b []byte, aborted bool) ([]any, []string) {
	var out []any
	var problems []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !aborted {
				problems = append(problems, fmt.Sprintf("NDJSON line without its newline: %q", b))
			}
			break
		}
		v, err := decodeJSONValue(b[:i])
		if err != nil {
			problems = append(problems, fmt.Sprintf("NDJSON line %d is not JSON: %v", len(out)+1, err))
		} else {
			out = append(out, v)
		}
		b = b[i+1:]
	}
	return out, problems
}

// sseEvents parses server-sent events ("event: T\ndata: {…}\n\n"): each
// one's data, whose type must be the event's name.
func sseEvents(b []byte) ([]any, []string) {
	var out []any
	var problems []string
	for _, block := range strings.Split(string(b), "\n\n") {
		if block == "" {
			continue
		}
		var name, data string
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			default:
				problems = append(problems, fmt.Sprintf("server-sent event line %q", line))
			}
		}
		v, err := decodeJSONValue([]byte(data))
		if err != nil {
			problems = append(problems, fmt.Sprintf("event %q data is not JSON: %v", name, err))
			continue
		}
		if m, ok := v.(map[string]any); !ok || m["type"] != name {
			problems = append(problems, fmt.Sprintf("event %q carries data of another type: %s", name, data))
		}
		out = append(out, v)
	}
	return out, problems
}

// renameProblems renames, one at a time, each property of each object the
// schema validated (once per schema and property) and reports the renames
// the schema still accepts: a JSON tag renamed in the code must fail the
// test. Objects whose schema allows other properties on purpose (maps,
// OpenHands' free-form args) are skipped.
func renameProblems(sv *schemaValidator, body jsonBody, tried map[string]bool) []string {
	var problems []string
	ptrs := make([]string, 0, len(sv.objects))
	for p := range sv.objects {
		ptrs = append(ptrs, p)
	}
	sort.Strings(ptrs)
	for _, ptr := range ptrs {
		s := sv.objects[ptr]
		switch s["additionalProperties"].(type) {
		case map[string]any:
			continue
		case bool:
			if s["additionalProperties"] == true {
				continue
			}
		}
		obj := valueAt(body.value, ptr).(map[string]any)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			id := fmt.Sprintf("%p/%s", s, k)
			if tried[id] {
				continue
			}
			tried[id] = true
			mutated := deepCopy(body.value)
			m := valueAt(mutated, ptr).(map[string]any)
			m[k+"_renamed"] = m[k]
			delete(m, k)
			if len(newValidator(sv.api).validate(body.schema, mutated, "")) == 0 {
				problems = append(problems, fmt.Sprintf("the schema accepts %s%s with %q renamed %q (set additionalProperties: false)",
					body.what, ptr, k, k+"_renamed"))
			}
		}
	}
	return problems
}

func valueAt(v any, ptr string) any {
	if ptr == "" {
		return v
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, _ := strconv.Atoi(tok)
			v = x[i]
		}
	}
	return v
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}

// checkExchanges validates every exchange and runs the rename check on
// every body; it returns the problems, one line each.
func checkExchanges(o *openAPI, exchanges []*exchange) []string {
	cc := &contractCheck{api: o}
	tried := map[string]bool{}
	var out []string
	for _, ex := range exchanges {
		problems, bodies := cc.check(ex)
		for _, b := range bodies {
			sv := newValidator(o)
			if b.schema == nil {
				problems = append(problems, b.what+": no schema documented")
				continue
			}
			if errs := sv.validate(b.schema, b.value, ""); len(errs) > 0 {
				for _, e := range errs {
					problems = append(problems, b.what+" "+e)
				}
				continue
			}
			problems = append(problems, renameProblems(sv, b, tried)...)
		}
		for _, p := range problems {
			out = append(out, ex.String()+": "+p)
		}
	}
	return slices.Compact(out)
}

// Keys each object of the document may have: the YAML of a flow mapping
// (`{type: string, description: a, b}`) silently grows a key at a comma,
// and an unknown keyword would be ignored by a validator.
var (
	operationKeys   = []string{"summary", "description", "operationId", "parameters", "requestBody", "responses", "security"}
	parameterKeys   = []string{"$ref", "name", "in", "required", "description", "schema"}
	requestBodyKeys = []string{"$ref", "description", "content", "required"}
	responseKeys    = []string{"$ref", "description", "content", "headers"}
	mediaTypeKeys   = []string{"schema", "example"}
)

// docProblems checks the document itself: known keys everywhere, every
// schema made of keywords the validator knows, every reference resolved,
// every discriminator mapping onto its oneOf, and every error status
// answered with the one shared error response.
func docProblems(o *openAPI) []string {
	var out []string
	keys := func(where string, m map[string]any, allowed []string) {
		for k := range m {
			if !slices.Contains(allowed, k) {
				out = append(out, fmt.Sprintf("%s: unknown key %q", where, k))
			}
		}
	}
	var schema func(where string, s map[string]any)
	schema = func(where string, s map[string]any) {
		for k := range s {
			if !schemaKeywords[k] {
				out = append(out, fmt.Sprintf("%s: unknown schema keyword %q", where, k))
			}
		}
		if ref, ok := s["$ref"].(string); ok {
			if _, err := o.lookup(ref); err != nil {
				out = append(out, where+": "+err.Error())
			}
		}
		if f, ok := s["format"].(string); ok && !schemaFormats[f] {
			out = append(out, fmt.Sprintf("%s: unknown format %q", where, f))
		}
		if props, ok := s["properties"].(map[string]any); ok {
			for k, p := range props {
				schema(where+"/properties/"+k, p.(map[string]any))
			}
			if s["type"] != "object" {
				out = append(out, where+": properties without type object")
			}
		}
		if r, ok := s["required"].([]any); ok {
			props, _ := s["properties"].(map[string]any)
			for _, k := range r {
				if _, ok := props[k.(string)]; !ok {
					out = append(out, fmt.Sprintf("%s: required %q is not a property", where, k))
				}
			}
		}
		if it, ok := s["items"].(map[string]any); ok {
			schema(where+"/items", it)
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			schema(where+"/additionalProperties", ap)
		}
		variants, _ := s["oneOf"].([]any)
		var refs []string
		for i, v := range variants {
			schema(fmt.Sprintf("%s/oneOf/%d", where, i), v.(map[string]any))
			if r, ok := v.(map[string]any)["$ref"].(string); ok {
				refs = append(refs, r)
			}
		}
		if d, ok := s["discriminator"].(map[string]any); ok {
			mapping, _ := d["mapping"].(map[string]any)
			for k, r := range mapping {
				if !slices.Contains(refs, r.(string)) {
					out = append(out, fmt.Sprintf("%s: discriminator maps %q to %v, which is not in oneOf", where, k, r))
				}
			}
		}
	}
	content := func(where string, c any) {
		m, _ := c.(map[string]any)
		for mt, v := range m {
			media := v.(map[string]any)
			keys(where+"/"+mt, media, mediaTypeKeys)
			if s, ok := media["schema"].(map[string]any); ok {
				schema(where+"/"+mt+"/schema", s)
			}
		}
	}
	param := func(where string, p map[string]any) {
		keys(where, p, parameterKeys)
		if s, ok := p["schema"].(map[string]any); ok {
			schema(where+"/schema", s)
		}
	}
	comps, _ := o.doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	for name, s := range schemas {
		schema("#/components/schemas/"+name, s.(map[string]any))
	}
	params, _ := comps["parameters"].(map[string]any)
	for name, p := range params {
		param("#/components/parameters/"+name, p.(map[string]any))
	}
	resps, _ := comps["responses"].(map[string]any)
	for name, r := range resps {
		keys("#/components/responses/"+name, r.(map[string]any), responseKeys)
		content("#/components/responses/"+name+"/content", r.(map[string]any)["content"])
	}
	for _, p := range o.paths {
		for m, v := range p.item {
			where := p.template + " " + m
			if m == "parameters" {
				for i, prm := range v.([]any) {
					param(fmt.Sprintf("%s/%d", where, i), prm.(map[string]any))
				}
				continue
			}
			op := v.(map[string]any)
			keys(where, op, operationKeys)
			ps, _ := op["parameters"].([]any)
			for i, prm := range ps {
				param(fmt.Sprintf("%s/parameters/%d", where, i), prm.(map[string]any))
			}
			if rb, ok := op["requestBody"].(map[string]any); ok {
				keys(where+"/requestBody", rb, requestBodyKeys)
				content(where+"/requestBody/content", rb["content"])
			}
			rs, _ := op["responses"].(map[string]any)
			for code, r := range rs {
				rm := r.(map[string]any)
				keys(where+"/responses/"+code, rm, responseKeys)
				content(where+"/responses/"+code+"/content", rm["content"])
				if n, _ := strconv.Atoi(code); n >= 400 && rm["$ref"] != errorResponseRef {
					out = append(out, fmt.Sprintf("%s/responses/%s: an error status answered otherwise than with %s", where, code, errorResponseRef))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIDocument checks docs/openapi.yaml itself (docProblems).
func TestOpenAPIDocument(t *testing.T) {
	for _, p := range docProblems(loadOpenAPIFile(t, "../docs/openapi.yaml")) {
		t.Error(p)
	}
}

// validatorSpec is a small document for TestOpenAPISchemaValidator.
const validatorSpec = `
openapi: 3.0.3
paths: {}
components:
  schemas:
    Thing:
      type: object
      required: [name, size]
      properties:
        name: {type: string, enum: [a, b]}
        size: {type: integer, minimum: 0}
        ratio: {type: number}
        when: {type: string, format: date-time}
        blob: {type: string, format: byte}
        note: {type: string, nullable: true}
        tags: {type: array, items: {type: string}, minItems: 1, maxItems: 2}
        env: {type: object, additionalProperties: {type: string}}
        any: {description: anything}
        kid: {$ref: "#/components/schemas/Kid"}
      additionalProperties: false
    Kid:
      type: object
      properties:
        id: {type: string, pattern: "^k[0-9]+$"}
      additionalProperties: false
    Animal:
      oneOf:
        - {$ref: "#/components/schemas/Cat"}
        - {$ref: "#/components/schemas/Dog"}
      discriminator:
        propertyName: kind
        mapping: {cat: "#/components/schemas/Cat", dog: "#/components/schemas/Dog"}
    Cat:
      type: object
      required: [kind]
      properties: {kind: {type: string, enum: [cat]}, purrs: {type: boolean}}
      additionalProperties: false
    Dog:
      type: object
      required: [kind]
      properties: {kind: {type: string, enum: [dog]}, barks: {type: boolean}}
      additionalProperties: false
    Either:
      oneOf:
        - {type: integer}
        - {type: string}
    Open:
      type: object
      properties: {a: {type: string}}
    Odd:
      type: object
      properties: {a: {type: string, const: x}}
`

// TestOpenAPISchemaValidator shows that the validator the schema tests
// rely on refuses what it must: each case would pass a validator that
// ignored the keyword it exercises.
func TestOpenAPISchemaValidator(t *testing.T) {
	o := parseOpenAPI(t, []byte(validatorSpec))
	for _, tc := range []struct {
		schema, json string
		want         string // "" for valid, else a piece of the first problem
	}{
		{"Thing", `{"name":"a","size":1}`, ""},
		{"Thing", `{"name":"a","size":1,"ratio":0.5,"when":"2026-01-02T03:04:05.123Z","blob":"AAE=","note":null,"tags":["x"],"env":{"K":"V"},"any":{"x":[1]},"kid":{"id":"k1"}}`, ""},
		{"Thing", `{"name":"a"}`, `required property "size" is missing`},
		{"Thing", `{"name":"a","size":1,"sise":2}`, `property "sise" is not in the schema`},
		{"Thing", `{"name":"c","size":1}`, `c is not one of [a b]`},
		{"Thing", `{"name":"a","size":1,"note":1}`, `a number where a string is expected`},
		{"Thing", `{"name":"a","size":1.5}`, `1.5 where an integer is expected`},
		{"Thing", `{"name":"a","size":-1}`, `below the minimum`},
		{"Thing", `{"name":"a","size":"1"}`, `a string where a number is expected`},
		{"Thing", `{"name":"a","size":1,"ratio":true}`, `a boolean where a number is expected`},
		{"Thing", `{"name":"a","size":1,"when":"yesterday"}`, `is not a date-time`},
		{"Thing", `{"name":"a","size":1,"blob":"%%%"}`, `is not base64`},
		{"Thing", `{"name":null,"size":1}`, `null is not allowed`},
		{"Thing", `{"name":"a","size":1,"tags":[]}`, `fewer than 1`},
		{"Thing", `{"name":"a","size":1,"tags":["a","b","c"]}`, `more than 2`},
		{"Thing", `{"name":"a","size":1,"tags":[1]}`, `/tags/0: a number where a string`},
		{"Thing", `{"name":"a","size":1,"env":{"K":1}}`, `/env/K: a number where a string`},
		{"Thing", `{"name":"a","size":1,"kid":{"id":"x1"}}`, `does not match`},
		{"Thing", `{"name":"a","size":1,"kid":{"ID":"k1"}}`, `/kid: property "ID" is not in the schema`},
		{"Thing", `[]`, `an array where an object is expected`},
		{"Animal", `{"kind":"cat","purrs":true}`, ""},
		{"Animal", `{"kind":"dog","purrs":true}`, `property "purrs" is not in the schema`},
		{"Animal", `{"kind":"cow"}`, `"cow" is not in the discriminator's mapping`},
		{"Animal", `{"purrs":true}`, `discriminator "kind" is missing`},
		{"Either", `1`, ""},
		{"Either", `"1"`, ""},
		{"Either", `true`, `matches none of oneOf`},
		{"Open", `{"a":"x","b":1}`, ""},
		{"Odd", `{"a":"x"}`, `schema keyword "const" is not supported`},
	} {
		v, err := decodeJSONValue([]byte(tc.json))
		if err != nil {
			t.Fatal(err)
		}
		errs := newValidator(o).validate(map[string]any{"$ref": "#/components/schemas/" + tc.schema}, v, "")
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s %s: %v, want valid", tc.schema, tc.json, errs)
		case tc.want != "" && (len(errs) == 0 || !strings.Contains(errs[0], tc.want)):
			t.Errorf("%s %s: %v, want %q", tc.schema, tc.json, errs, tc.want)
		}
	}

	// The rename check: a closed object's renamed property fails; an open
	// one's (Open, env) does not count.
	v, _ := decodeJSONValue([]byte(`{"name":"a","size":1,"env":{"K":"V"}}`))
	sv := newValidator(o)
	body := jsonBody{"response", map[string]any{"$ref": "#/components/schemas/Thing"}, v}
	if errs := sv.validate(body.schema, v, ""); len(errs) > 0 {
		t.Fatal(errs)
	}
	if p := renameProblems(sv, body, map[string]bool{}); len(p) != 0 {
		t.Errorf("renames of a strict schema accepted: %v", p)
	}
	v, _ = decodeJSONValue([]byte(`{"a":"x"}`))
	o.doc["components"].(map[string]any)["schemas"].(map[string]any)["Open"].(map[string]any)["additionalProperties"] = false
	sv = newValidator(o)
	body = jsonBody{"response", map[string]any{"$ref": "#/components/schemas/Open"}, v}
	sv.validate(body.schema, v, "")
	delete(o.doc["components"].(map[string]any)["schemas"].(map[string]any)["Open"].(map[string]any), "additionalProperties")
	if p := renameProblems(sv, body, map[string]bool{}); len(p) != 1 || !strings.Contains(p[0], `"a" renamed "a_renamed"`) {
		t.Errorf("rename check on a schema without additionalProperties: %v", p)
	}

	// The document check finds the YAML comma trap and an undocumented
	// error shape.
	bad := parseOpenAPI(t, []byte(`
openapi: 3.0.3
paths:
  /x:
    get:
      responses:
        "404": {description: gone}
components:
  schemas:
    S: {type: string, description: one, two}
`))
	p := strings.Join(docProblems(bad), "\n")
	if !strings.Contains(p, `unknown schema keyword "two"`) || !strings.Contains(p, "an error status answered otherwise") {
		t.Errorf("document problems:\n%s", p)
	}
}
