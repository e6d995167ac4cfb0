package ec2sim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

const maxSignatureSkew = 15 * time.Minute

// sigV4Auth is a parsed AWS Signature Version 4 Authorization header.
type sigV4Auth struct {
	// scope is the credential: access key ID, date, region, service, "aws4_request".
	scope     []string
	signed    string
	signature string
}

// verifySignature checks an AWS Signature Version 4 Authorization header against the configured credentials.
// Without configured credentials every request is accepted.
func (s *Server) verifySignature(r *http.Request, body string) *apiError {
	creds := s.cfg.Credentials
	if creds == nil {
		return nil
	}
	auth, aerr := parseAuthorization(r.Header.Get("Authorization"))
	if aerr != nil {
		return aerr
	}
	if auth.scope[0] != creds.AccessKeyID {
		return errAuthFailure()
	}
	amzDate := r.Header.Get("X-Amz-Date")
	if aerr := checkSigningTime(amzDate, auth.scope[1]); aerr != nil {
		return aerr
	}
	canonical := canonicalRequest(r, auth.signed, body)
	crHash := sha256.Sum256([]byte(canonical))
	stringToSign := strings.Join([]string{"AWS4-HMAC-SHA256", amzDate, strings.Join(auth.scope[1:], "/"), hex.EncodeToString(crHash[:])}, "\n")
	key := hmacSHA256([]byte("AWS4"+creds.SecretAccessKey), auth.scope[1])
	for _, part := range auth.scope[2:] {
		key = hmacSHA256(key, part)
	}
	want := hex.EncodeToString(hmacSHA256(key, stringToSign))
	if !hmac.Equal([]byte(want), []byte(auth.signature)) {
		return errAuthFailure()
	}
	return nil
}

func errAuthFailure() *apiError {
	return newError(http.StatusUnauthorized, "AuthFailure", "AWS was not able to validate the provided access credentials")
}

// parseAuthorization reads `AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...`.
func parseAuthorization(auth string) (sigV4Auth, *apiError) {
	if auth == "" {
		return sigV4Auth{}, newError(http.StatusUnauthorized, "MissingAuthenticationToken", "Request is missing Authentication Token")
	}
	algo, rest, _ := strings.Cut(auth, " ")
	if algo != "AWS4-HMAC-SHA256" {
		return sigV4Auth{}, newError(http.StatusBadRequest, "IncompleteSignature", "Unsupported signature algorithm %q.", algo)
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok {
			fields[k] = v
		}
	}
	cred := fields["Credential"]
	a := sigV4Auth{signed: fields["SignedHeaders"], signature: fields["Signature"]}
	if cred == "" || a.signed == "" || a.signature == "" {
		return a, newError(http.StatusBadRequest, "IncompleteSignature", "Authorization header requires Credential, SignedHeaders and Signature.")
	}
	a.scope = strings.Split(cred, "/")
	if len(a.scope) != 5 || a.scope[4] != "aws4_request" {
		return a, newError(http.StatusBadRequest, "IncompleteSignature", "Credential %q is malformed.", cred)
	}
	return a, nil
}

// checkSigningTime checks X-Amz-Date against the credential scope's date and the clock.
func checkSigningTime(amzDate, scopeDate string) *apiError {
	if len(amzDate) < 8 || amzDate[:8] != scopeDate {
		return newError(http.StatusBadRequest, "IncompleteSignature", "X-Amz-Date does not match the credential scope date.")
	}
	signedAt, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return newError(http.StatusBadRequest, "IncompleteSignature", "X-Amz-Date %q is malformed.", amzDate)
	}
	// AWS refuses signatures more than 15 minutes away from its clock (real time, whatever the emulated clock).
	if skew := time.Since(signedAt); skew > maxSignatureSkew || skew < -maxSignatureSkew {
		return newError(http.StatusBadRequest, "RequestExpired", "Request has expired.")
	}
	return nil
}

// canonicalRequest is SigV4's canonical form of the request, over the headers the client signed.
func canonicalRequest(r *http.Request, signed, body string) string {
	payloadHash := r.Header.Get("X-Amz-Content-Sha256")
	if payloadHash == "" {
		sum := sha256.Sum256([]byte(body))
		payloadHash = hex.EncodeToString(sum[:])
	}
	var canonHeaders strings.Builder
	for _, name := range strings.Split(signed, ";") {
		var value string
		switch name {
		case "host":
			value = r.Host
		case "content-length":
			value = strconv.FormatInt(r.ContentLength, 10)
		default:
			vals := r.Header.Values(name)
			trimmed := make([]string, len(vals))
			for i, v := range vals {
				trimmed[i] = strings.Join(strings.Fields(v), " ")
			}
			value = strings.Join(trimmed, ",")
		}
		canonHeaders.WriteString(name + ":" + value + "\n")
	}
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	return strings.Join([]string{r.Method, path, canonicalQuery(r.URL.Query()), canonHeaders.String(), signed, payloadHash}, "\n")
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func canonicalQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		vals := append([]string(nil), q[k]...)
		sort.Strings(vals)
		for _, v := range vals {
			parts = append(parts, awsEscape(k)+"="+awsEscape(v))
		}
	}
	return strings.Join(parts, "&")
}

func awsEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}
