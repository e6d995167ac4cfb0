// Package stssim is a stand-in for AWS STS's AssumeRoleWithWebIdentity in the e2e rig: it verifies a
// projected ServiceAccount token against the API server's issuer keys (signature, audience, expiry), reads
// the ServiceAccount from its subject, and answers with the credentials of the S3 server account a role
// maps to when the role allows that ServiceAccount. Everything else gets STS's error XML, as the AWS SDKs
// expect it (Query protocol, API version 2011-06-15).
package stssim

import (
	"crypto"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Audience is the token audience STS accepts (the CSIDriver's tokenRequests ask for it).
const Audience = "sts.amazonaws.com"

// Role is an IAM role the stand-in knows.
type Role struct {
	ARN string
	// ServiceAccounts may assume the role: "<namespace>/<name>".
	ServiceAccounts []string
	// AccessKeyID and SecretAccessKey are the S3 server account the role's sessions act as.
	AccessKeyID, SecretAccessKey string
}

// Config configures a Server.
type Config struct {
	// Keys verify token signatures, by key ID (ParseJWKS of the API server's /openid/v1/jwks).
	Keys map[string]crypto.PublicKey
	// Issuer, if not empty, must be the tokens' iss.
	Issuer string
	// Now is the clock for token expiry; nil means time.Now.
	Now func() time.Time
	// SessionDuration is the credentials' lifetime; 0 means one hour.
	SessionDuration time.Duration
}

// Server is the STS stand-in; it is an http.Handler.
type Server struct {
	cfg Config

	mu    sync.Mutex
	roles map[string]Role
	// calls counts answered requests by outcome ("ok" or the error code), for tests.
	calls map[string]int
}

// New returns a Server with no roles.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionDuration == 0 {
		cfg.SessionDuration = time.Hour
	}
	return &Server{cfg: cfg, roles: map[string]Role{}, calls: map[string]int{}}
}

// SetRole adds or replaces a role.
func (s *Server) SetRole(r Role) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roles[r.ARN] = r
}

// Calls returns how many requests ended with outcome ("ok", or an STS error code such as AccessDenied).
func (s *Server) Calls(outcome string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[outcome]
}

// stsError is an STS error answer.
type stsError struct {
	status  int
	code    string
	message string
}

func (e *stsError) Error() string { return e.code + ": " + e.message }

func senderError(status int, code, format string, args ...any) *stsError {
	return &stsError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// ServeHTTP answers STS Query protocol requests (form POST, or GET with query parameters).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := newID(16)
	if err := r.ParseForm(); err != nil {
		s.writeError(w, requestID, senderError(http.StatusBadRequest, "InvalidParameterValue", "bad form: %v", err))
		return
	}
	if a := r.Form.Get("Action"); a != "AssumeRoleWithWebIdentity" {
		s.writeError(w, requestID, senderError(http.StatusBadRequest, "InvalidAction", "action %q is not valid for this web service", a))
		return
	}
	res, err := s.assume(r.Form.Get("RoleArn"), r.Form.Get("RoleSessionName"), r.Form.Get("WebIdentityToken"))
	if err != nil {
		s.writeError(w, requestID, err)
		return
	}
	s.count("ok")
	res.ResponseMetadata.RequestID = requestID
	writeXML(w, http.StatusOK, res)
}

func (s *Server) assume(roleARN, session, token string) (*assumeResponse, *stsError) {
	for name, v := range map[string]string{"RoleArn": roleARN, "RoleSessionName": session, "WebIdentityToken": token} {
		if v == "" {
			return nil, senderError(http.StatusBadRequest, "MissingParameter", "the request must contain the parameter %s", name)
		}
	}
	claims, err := Verify(token, s.cfg.Keys, Audience, s.cfg.Issuer, s.cfg.Now())
	if errors.Is(err, errExpired) {
		return nil, senderError(http.StatusBadRequest, "ExpiredTokenException", "Token expired: %v", err)
	}
	if err != nil {
		return nil, senderError(http.StatusBadRequest, "InvalidIdentityToken", "%v", err)
	}
	ns, name, ok := serviceAccount(claims.Subject)
	if !ok {
		return nil, senderError(http.StatusBadRequest, "InvalidIdentityToken", "subject %q is not a ServiceAccount", claims.Subject)
	}
	s.mu.Lock()
	role, known := s.roles[roleARN]
	s.mu.Unlock()
	if !known || !slices.Contains(role.ServiceAccounts, ns+"/"+name) {
		// As STS: the same answer whether the role is unknown or does not trust the caller.
		return nil, senderError(http.StatusForbidden, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity (role %s, subject %s)", roleARN, claims.Subject)
	}
	res := &assumeResponse{Xmlns: stsNamespace}
	r := &res.Result
	r.SubjectFromWebIdentityToken, r.Audience, r.Provider = claims.Subject, Audience, claims.Issuer
	r.AssumedRoleUser.Arn = strings.Replace(strings.Replace(roleARN, ":iam:", ":sts:", 1), ":role/", ":assumed-role/", 1) + "/" + session
	r.AssumedRoleUser.AssumedRoleID = "AROA" + strings.ToUpper(newID(8)) + ":" + session
	r.Credentials = credentials{
		AccessKeyID: role.AccessKeyID, SecretAccessKey: role.SecretAccessKey,
		// No session token: versitygw knows long-term keys only and refuses any x-amz-security-token
		// (InvalidToken), so the session acts as the account's keys themselves.
		Expiration: s.cfg.Now().Add(s.cfg.SessionDuration).UTC().Format(time.RFC3339),
	}
	return res, nil
}

// serviceAccount splits system:serviceaccount:<ns>:<name>.
func serviceAccount(sub string) (ns, name string, ok bool) {
	rest, ok := strings.CutPrefix(sub, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	ns, name, ok = strings.Cut(rest, ":")
	return ns, name, ok && ns != "" && name != "" && !strings.Contains(name, ":")
}

func (s *Server) count(outcome string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[outcome]++
}

func (s *Server) writeError(w http.ResponseWriter, requestID string, e *stsError) {
	s.count(e.code)
	body := errorResponse{Xmlns: stsNamespace}
	body.Error.Type, body.Error.Code, body.Error.Message = "Sender", e.code, e.message
	body.RequestID = requestID
	writeXML(w, e.status, body)
}

func writeXML(w http.ResponseWriter, status int, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write(append([]byte(xml.Header), b...))
}

func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

const stsNamespace = "https://sts.amazonaws.com/doc/2011-06-15/"

type credentials struct {
	AccessKeyID     string `xml:"AccessKeyId"`
	SecretAccessKey string `xml:"SecretAccessKey"`
	SessionToken    string `xml:"SessionToken,omitempty"`
	Expiration      string `xml:"Expiration"`
}

type assumeResponse struct {
	XMLName xml.Name `xml:"AssumeRoleWithWebIdentityResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Result  struct {
		SubjectFromWebIdentityToken string
		Audience                    string
		AssumedRoleUser             struct {
			Arn           string
			AssumedRoleID string `xml:"AssumedRoleId"`
		}
		Credentials credentials
		Provider    string
	} `xml:"AssumeRoleWithWebIdentityResult"`
	ResponseMetadata struct {
		RequestID string `xml:"RequestId"`
	}
}

type errorResponse struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Error   struct {
		Type, Code, Message string
	}
	RequestID string `xml:"RequestId"`
}
