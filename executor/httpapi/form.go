package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
)

// ParseBool accepts what FastAPI accepts for a boolean query parameter;
// ok is false for anything else.
func ParseBool(v string) (b, ok bool) {
	switch strings.ToLower(v) {
	case "1", "true", "t", "yes", "y", "on":
		return true, true
	case "0", "false", "f", "no", "n", "off":
		return false, true
	}
	return false, false
}

// IsMultipart reports whether r's body is multipart/form-data.
func IsMultipart(r *http.Request) bool {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return ct == "multipart/form-data"
}

// FileParts reads the parts named "file" of a multipart/form-data body, in
// order, skipping the others.
type FileParts struct{ mr *multipart.Reader }

// NewFileParts starts reading r's multipart body.
func NewFileParts(r *http.Request) (*FileParts, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, BadRequest(fmt.Errorf("read multipart body: %w", err))
	}
	return &FileParts{mr: mr}, nil
}

// ErrNoFilePart is a multipart body without a "file" part.
var ErrNoFilePart = errors.New(`multipart body has no "file" part`)

// Next returns the next "file" part (the caller closes it), io.EOF after
// the last.
func (f *FileParts) Next() (*multipart.Part, error) {
	for {
		part, err := f.mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		if err != nil {
			return nil, BadRequest(fmt.Errorf("read multipart body: %w", err))
		}
		if part.FormName() == "file" {
			return part, nil
		}
		part.Close()
	}
}

// UploadName is the file name of an uploaded part: a plain name, never a
// path (OpenHands joins whatever the client sends to the destination).
func UploadName(part *multipart.Part) (string, error) {
	name := part.FileName()
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", BadRequest(fmt.Errorf("upload file name %q is not a plain file name", name))
	}
	return name, nil
}
