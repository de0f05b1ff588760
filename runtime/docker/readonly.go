package docker

import (
	"fmt"
	"net/http"
)

// readOnlyTransport lets only GET and HEAD requests leave the process, so no
// code path of the exporter can create, stop or remove a container.
type readOnlyTransport struct {
	next http.RoundTripper
}

// ErrNotAllowed is returned for any request that could change the daemon.
type ErrNotAllowed struct {
	Method, Path string
}

func (e *ErrNotAllowed) Error() string {
	return fmt.Sprintf("pleg_exporter is read-only: %s %s is not allowed and was not sent", e.Method, e.Path)
}

// Code classifies the refusal for pleg_relist_errors_total.
func (e *ErrNotAllowed) Code() string { return "PermissionDenied" }

func (t readOnlyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &ErrNotAllowed{Method: req.Method, Path: req.URL.Path}
	}
	return t.next.RoundTrip(req)
}
