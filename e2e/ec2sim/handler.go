package ec2sim

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
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

// actions maps each supported EC2 action to its handler; mutating tells the rate limiter its class.
var actions = map[string]struct {
	fn       handlerFunc
	mutating bool
}{
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

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/metrics":
		promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return
	case "/debug/state":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.State())
		return
	case "/debug/faults":
		serveSetting(w, r, "faults", func(f Faults) error {
			if err := f.validate(); err != nil {
				return err
			}
			s.SetFaults(f)
			return nil
		}, s.Faults)
	case "/debug/quotas":
		serveSetting(w, r, "quotas", func(q Quotas) error { s.SetQuotas(q); return nil }, s.Quotas)
		return
	case "/":
	default:
		http.NotFound(w, r)
		return
	}
	reqID := newRequestID()
	if r.Method != http.MethodPost {
		writeError(w, reqID, newError(http.StatusBadRequest, "InvalidHttpRequest", "EC2 Query requests must be POSTed to /."))
		return
	}
	body, err := readBody(r)
	if err != nil {
		writeError(w, reqID, newError(http.StatusBadRequest, "InvalidHttpRequest", "Reading the request body failed."))
		return
	}
	f, err := decodeForm(body)
	if err != nil {
		s.count("unknown", "MalformedQueryString")
		writeError(w, reqID, newError(http.StatusBadRequest, "MalformedQueryString", "The request body is not a valid form."))
		return
	}
	action := f.str("Action")
	label := action
	a, known := actions[action]
	if !known {
		label = "unknown"
	}
	if aerr := s.verifySignature(r, body); aerr != nil {
		s.count(label, aerr.Code)
		writeError(w, reqID, aerr)
		return
	}
	if action == "" {
		s.count(label, "MissingAction")
		writeError(w, reqID, newError(http.StatusBadRequest, "MissingAction", "The request must contain the parameter Action."))
		return
	}
	if !known {
		s.count(label, "InvalidAction")
		writeError(w, reqID, newError(http.StatusBadRequest, "InvalidAction", "The action %s is not valid for this web service.", action))
		return
	}
	switch s.faults.apply(r.Context(), action) {
	case faultDrop:
		s.count(label, "Dropped")
		dropConnection(w)
		return
	case faultThrottle:
		s.count(label, "RequestLimitExceeded")
		writeError(w, reqID, errThrottled())
		return
	case faultInternal:
		s.count(label, "InternalError")
		writeError(w, reqID, errInternal())
		return
	}
	if !s.limits.allow(a.mutating) {
		s.count(label, "RequestLimitExceeded")
		writeError(w, reqID, errThrottled())
		return
	}

	s.mu.Lock()
	req := &request{action: action, form: f, now: s.clock()}
	settled := s.settle(req.now)
	out, aerr := a.fn(s, req)
	if settled || req.mutated {
		s.persist()
	}
	s.mu.Unlock()

	if aerr != nil {
		s.log.V(4).Info("EC2 error", "action", action, "code", aerr.Code, "message", aerr.Message)
		s.count(label, aerr.Code)
		writeError(w, reqID, aerr)
		return
	}
	s.log.V(5).Info("EC2 call", "action", action)
	s.count(label, "OK")
	writeResponse(w, action, reqID, out)
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

// serveSetting answers GET with a setting as JSON, and POST/PUT by decoding a new value (unknown fields
// refused) and applying it with set.
func serveSetting[T any](w http.ResponseWriter, r *http.Request, name string, set func(T) error, get func() T) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost, http.MethodPut:
		var v T
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			http.Error(w, name+": "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := set(v); err != nil {
			http.Error(w, name+": "+err.Error(), http.StatusBadRequest)
			return
		}
	default:
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(get())
}
