package rig

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// AuditLog is kube-apiserver's audit log of the write requests to some resources, read back by a test to
// count what a sidecar wrote.
type AuditLog struct {
	policy, path string
}

// NewAuditLog writes, into dir, a policy that records every write (create, update, patch, delete) to
// resources, given as "group/resource" ("" group for the core API, e.g. "/persistentvolumes"; subresources
// such as status are recorded with their resource), once per request when its response is complete.
func NewAuditLog(dir string, resources ...string) (*AuditLog, error) {
	var b strings.Builder
	b.WriteString(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  resources:
`)
	for _, r := range resources {
		group, resource, ok := strings.Cut(r, "/")
		if !ok {
			return nil, fmt.Errorf("audit resource %q: want group/resource", r)
		}
		fmt.Fprintf(&b, "  - group: %q\n    resources: [%q, %q]\n", group, resource, resource+"/status")
	}
	b.WriteString("- level: None\n")
	a := &AuditLog{policy: filepath.Join(dir, "audit-policy.yaml"), path: filepath.Join(dir, "audit.log")}
	if err := os.WriteFile(a.policy, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return a, nil
}

// APIServerArgs are the kube-apiserver flags that write this log. Blocking mode writes each event from the
// request's own handler, so none is dropped by a full buffer; it may still land just after the client got its
// response, which is why WaitFor polls.
func (a *AuditLog) APIServerArgs() []string {
	return []string{"--audit-policy-file=" + a.policy, "--audit-log-path=" + a.path, "--audit-log-mode=blocking"}
}

// AuditWrite is one write request in the log.
type AuditWrite struct {
	Verb     string
	Resource string // with "/subresource" when there is one
	Name     string
	Code     int
	User     string
	// UserAgent tells apart the programs that share one user (the sidecars of a Pod under one ServiceAccount).
	UserAgent string
	// Time is when the API server completed the request (the event's stageTimestamp); zero if the log has none.
	Time time.Time
}

// String is "verb resource name code user", the form tests compare and print.
func (w AuditWrite) String() string {
	return fmt.Sprintf("%s %s %s %d %s", w.Verb, w.Resource, w.Name, w.Code, w.User)
}

// auditEvent is the part of an audit.k8s.io/v1 Event the log is read for.
type auditEvent struct {
	Verb      string                    `json:"verb"`
	Stage     string                    `json:"stage"`
	StageTime time.Time                 `json:"stageTimestamp"`
	User      struct{ Username string } `json:"user"`
	UserAgent string                    `json:"userAgent"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// Writes reads the log and returns its write requests in order.
func (a *AuditLog) Writes() ([]AuditWrite, error) {
	f, err := os.Open(a.path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	return parseAudit(f)
}

func parseAudit(r io.Reader) ([]AuditWrite, error) {
	var out []AuditWrite
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log line %q: %w", sc.Text(), err)
		}
		if ev.Stage != "ResponseComplete" {
			continue
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		out = append(out, AuditWrite{Verb: ev.Verb, Resource: res, Name: ev.ObjectRef.Name, Code: ev.ResponseStatus.Code, User: ev.User.Username,
			UserAgent: ev.UserAgent, Time: ev.StageTime})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return out, nil
}

// MustWrites is Writes failing t on an error.
func (a *AuditLog) MustWrites(t testing.TB) []AuditWrite {
	t.Helper()
	w, err := a.Writes()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// WaitFor waits until the log holds a write that sentinel matches and returns the whole log as read then.
// A test makes a sidecar write for a sentinel object after the event it checks: once the sentinel's write is
// in the log, so is every write the sidecar made for what it had queued before.
func (a *AuditLog) WaitFor(t testing.TB, ctx context.Context, timeout time.Duration, what string, sentinel func(AuditWrite) bool) []AuditWrite {
	t.Helper()
	var writes []AuditWrite
	Eventually(t, ctx, timeout, what+" in the audit log", func(context.Context) (bool, error) {
		w, err := a.Writes()
		if err != nil {
			return false, err
		}
		writes = w
		return Filter(w, sentinel) != nil, nil
	})
	return writes
}

// Filter returns the writes keep matches, in order.
func Filter(writes []AuditWrite, keep func(AuditWrite) bool) []AuditWrite {
	var out []AuditWrite
	for _, w := range writes {
		if keep(w) {
			out = append(out, w)
		}
	}
	return out
}

// ByUser matches the writes of user.
func ByUser(user string) func(AuditWrite) bool {
	return func(w AuditWrite) bool { return w.User == user }
}

// Strings returns the writes in their String form.
func Strings(writes []AuditWrite) []string {
	out := make([]string, len(writes))
	for i, w := range writes {
		out[i] = w.String()
	}
	return out
}
