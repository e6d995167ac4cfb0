package testutil

import (
	"fmt"
	"net/http"
	"sync"
)

// FakeIMDS is an IMDSv2 endpoint (token, then the instance identity document) for the tests of code that asks
// the instance metadata service for its region. The document names Region; with Region "" it answers 404, as an
// IMDS without one. It counts the documents served.
type FakeIMDS struct {
	Region string
	mu     sync.Mutex
	asked  int
}

func (f *FakeIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
		fmt.Fprint(w, "token")
	case r.Method == http.MethodGet && r.URL.Path == "/latest/dynamic/instance-identity/document" &&
		r.Header.Get("X-Aws-Ec2-Metadata-Token") == "token" && f.Region != "":
		f.mu.Lock()
		f.asked++
		f.mu.Unlock()
		fmt.Fprintf(w, `{"region": %q, "instanceId": "i-0123456789abcdef0"}`, f.Region)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

// Lookups is how many instance identity documents were served.
func (f *FakeIMDS) Lookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}
