package ec2sim

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"net/http"
	"time"
)

// request is one EC2 call being served, with the lock held.
type request struct {
	action string
	form   *form
	now    time.Time
	// mutated marks a change that must be persisted.
	mutated bool
}

// stopIfDryRun is called once a request has passed every check: with DryRun set EC2 answers DryRunOperation
// instead of acting.
func (r *request) stopIfDryRun() *apiError {
	dry, aerr := r.form.boolean("DryRun")
	if aerr != nil {
		return aerr
	}
	if dry {
		return errDryRun()
	}
	return nil
}

type handlerFunc func(s *Server, r *request) (any, *apiError)

// operation is an EC2 action's handler; mutating tells the rate limiter its class.
type operation struct {
	fn       handlerFunc
	mutating bool
}

// actions maps each supported EC2 action to its operation. It is a fixed table, never written to.
var actions = map[string]operation{
	"CreateVolume":                 {(*Server).createVolume, true},
	"CopyVolumes":                  {(*Server).copyVolumes, true},
	"DeleteVolume":                 {(*Server).deleteVolume, true},
	"DescribeVolumes":              {(*Server).describeVolumes, false},
	"DescribeVolumeStatus":         {(*Server).describeVolumeStatus, false},
	"AttachVolume":                 {(*Server).attachVolume, true},
	"DetachVolume":                 {(*Server).detachVolume, true},
	"DescribeInstances":            {(*Server).describeInstances, false},
	"DescribeInstanceTypes":        {(*Server).describeInstanceTypes, false},
	"DescribeAvailabilityZones":    {(*Server).describeAvailabilityZones, false},
	"ModifyVolume":                 {(*Server).modifyVolume, true},
	"DescribeVolumesModifications": {(*Server).describeVolumesModifications, false},
	"CreateTags":                   {(*Server).createTags, true},
	"DeleteTags":                   {(*Server).deleteTags, true},
	"CreateSnapshot":               {(*Server).createSnapshot, true},
	"DescribeSnapshots":            {(*Server).describeSnapshots, false},
	"DeleteSnapshot":               {(*Server).deleteSnapshot, true},
	"EnableFastSnapshotRestores":   {(*Server).enableFastSnapshotRestores, true},
	"LockSnapshot":                 {(*Server).lockSnapshot, true},
	"UnlockSnapshot":               {(*Server).unlockSnapshot, true},
}

// call is an EC2 request whose form has been decoded.
type call struct {
	action string
	// label is the action's name in ec2sim_requests_total: "unknown" for an action the emulator does not
	// have, so arbitrary Action values cannot grow the metric without bound.
	label string
	op    operation
	form  *form
	// invocation is the AWS SDK's amz-sdk-invocation-id, one per call across its retries ("" without it).
	invocation string
}

// serveEC2 answers one EC2 Query request (POST /): admit it (body, form, signature, action), pass it through
// the injected faults and rate limits, run its handler, and answer in EC2's XML. Every answer is counted.
func (s *Server) serveEC2(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	c, aerr := s.admit(r)
	if aerr != nil {
		s.answer(w, reqID, c, nil, aerr)
		return
	}
	s.inFlight.add(c.action, 1)
	defer s.inFlight.add(c.action, -1)
	fault, aerr := s.interfere(r.Context(), c)
	switch {
	case fault == faultDrop:
		s.count(c.label, "Dropped")
		dropConnection(w)
		return
	case aerr != nil:
		s.answer(w, reqID, c, nil, aerr)
		return
	}
	out, aerr := s.run(c)
	switch {
	case aerr == nil && fault == faultLostDrop:
		s.count(c.label, "LostAnswerDropped")
		dropConnection(w)
	case aerr == nil && fault == faultLostInternal:
		s.count(c.label, "LostAnswerInternalError")
		writeError(w, reqID, errInternal())
	default:
		s.answer(w, reqID, c, out, aerr)
	}
}

// admit decodes the request and checks what EC2 checks before an action runs: the form, the signature and
// the action's name. The call it returns is labelled even when it is refused.
func (s *Server) admit(r *http.Request) (call, *apiError) {
	c := call{label: "unknown"}
	body, err := readBody(r)
	if err != nil {
		return c, newError(http.StatusBadRequest, "InvalidHttpRequest", "Reading the request body failed.")
	}
	f, err := decodeForm(body)
	if err != nil {
		return c, newError(http.StatusBadRequest, "MalformedQueryString", "The request body is not a valid form.")
	}
	c.form = f
	c.invocation = r.Header.Get("amz-sdk-invocation-id")
	c.action = f.str("Action")
	op, known := actions[c.action]
	if known {
		c.label, c.op = c.action, op
	}
	if aerr := s.verifySignature(r, body); aerr != nil {
		return c, aerr
	}
	if c.action == "" {
		return c, newError(http.StatusBadRequest, "MissingAction", "The request must contain the parameter Action.")
	}
	if !known {
		return c, newError(http.StatusBadRequest, "InvalidAction", "The action %s is not valid for this web service.", c.action)
	}
	return c, nil
}

// interfere applies the injected faults (after their added latency, and a slowed call's, which it counts) and
// the rate limits to an admitted call:
// faultDrop means the connection is to close without an answer, an error is the answer instead of the
// action's, and a lost-answer fault is for serveEC2 to apply once the action has run.
func (s *Server) interfere(ctx context.Context, c call) (faultKind, *apiError) {
	d := s.faults.decide(c.action, c.op.mutating)
	if d.slowed {
		s.metrics.slowed.WithLabelValues(c.label).Inc()
	}
	hold(ctx, d.delay)
	fault := d.kind
	switch fault {
	case faultThrottle:
		return fault, errThrottled()
	case faultInternal:
		return fault, errInternal()
	case faultDrop:
		return fault, nil
	}
	if !s.limits.allow(c.action, c.op.mutating, c.form) {
		return faultNone, errThrottled()
	}
	return fault, nil
}

// run carries out the transitions due by now and then the action, under the lock, and persists what changed.
func (s *Server) run(c call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := &request{action: c.action, form: c.form, now: s.clock()}
	settled := s.settle(req.now)
	out, aerr := c.op.fn(s, req)
	if settled || req.mutated {
		s.persist()
	}
	return out, aerr
}

// answer writes the call's result, or its error in EC2's error XML, and counts it.
func (s *Server) answer(w http.ResponseWriter, reqID string, c call, out any, aerr *apiError) {
	if aerr != nil {
		s.log.V(4).Info("EC2 error", "action", c.action, "code", aerr.Code, "message", aerr.Message)
		s.count(c.label, aerr.Code)
		writeError(w, reqID, aerr)
		return
	}
	s.log.V(5).Info("EC2 call", "action", c.action)
	s.count(c.label, "OK")
	s.metrics.recordCall(c.label, c.invocation)
	writeResponse(w, c.action, reqID, out)
}

func (s *Server) count(action, code string) {
	s.metrics.requests.WithLabelValues(action, code).Inc()
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// writeResponse writes `<ActionResponse xmlns=...><requestId>..</requestId>...fields...</ActionResponse>`.
// body is a struct whose fields are the response's members (or nil).
func writeResponse(w http.ResponseWriter, action, reqID string, body any) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	buf.WriteString("<" + action + `Response xmlns="` + ec2Namespace + `"><requestId>`)
	_ = xml.EscapeText(&buf, []byte(reqID))
	buf.WriteString("</requestId>")
	if body != nil {
		// Encode the body's fields inside a throwaway element and keep only its content.
		var inner bytes.Buffer
		enc := xml.NewEncoder(&inner)
		if err := enc.EncodeElement(body, xml.StartElement{Name: xml.Name{Local: "x"}}); err != nil {
			writeError(w, reqID, errInternal())
			return
		}
		b := inner.Bytes()
		b = bytes.TrimPrefix(b, []byte("<x>"))
		b = bytes.TrimSuffix(b, []byte("</x>"))
		if !bytes.HasPrefix(b, []byte("<x/>")) {
			buf.Write(b)
		}
	}
	buf.WriteString("</" + action + "Response>")
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

type xmlErrorResponse struct {
	XMLName   xml.Name `xml:"Response"`
	Errors    []xmlErr `xml:"Errors>Error"`
	RequestID string   `xml:"RequestID"`
}

type xmlErr struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func writeError(w http.ResponseWriter, reqID string, e *apiError) {
	b, _ := xml.Marshal(xmlErrorResponse{Errors: []xmlErr{{Code: e.Code, Message: e.Message}}, RequestID: reqID})
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.Status)
	_, _ = w.Write(append([]byte(xml.Header), b...))
}

// dropConnection closes the TCP connection without an answer, as a failing load balancer does.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	// Not hijackable (HTTP/2): the closest is an empty 502.
	w.WriteHeader(http.StatusBadGateway)
}
