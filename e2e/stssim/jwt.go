package stssim

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
)

// JWK is one key of a JSON Web Key Set as the API server serves it at /openid/v1/jwks (EC P-256 or RSA).
type JWK struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Crv string `json:"crv,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
}

// ParseJWKS reads a JSON Web Key Set into public keys by key ID.
func ParseJWKS(data []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []JWK `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("parse JWKS: %w", err)
	}
	out := map[string]crypto.PublicKey{}
	for _, k := range set.Keys {
		key, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("JWKS key %q: %w", k.Kid, err)
		}
		out[k.Kid] = key
	}
	if len(out) == 0 {
		return nil, errors.New("JWKS holds no keys")
	}
	return out, nil
}

func (k JWK) publicKey() (crypto.PublicKey, error) {
	switch k.Kty {
	case "EC":
		if k.Crv != "P-256" {
			return nil, fmt.Errorf("curve %q: only P-256", k.Crv)
		}
		x, err1 := base64.RawURLEncoding.DecodeString(k.X)
		y, err2 := base64.RawURLEncoding.DecodeString(k.Y)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		if len(x) != 32 || len(y) != 32 {
			return nil, errors.New("P-256 coordinates must be 32 bytes")
		}
		// The uncompressed point encoding; the parser also checks that the point is on the curve.
		return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	case "RSA":
		n, err1 := b64Int(k.N)
		e, err2 := b64Int(k.E)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	}
	return nil, fmt.Errorf("key type %q: want EC or RSA", k.Kty)
}

func b64Int(s string) (*big.Int, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	return new(big.Int).SetBytes(b), nil
}

// Claims are the parts of a projected ServiceAccount token STS looks at.
type Claims struct {
	Issuer    string   `json:"iss"`
	Subject   string   `json:"sub"`
	Audience  audience `json:"aud"`
	Expiry    int64    `json:"exp"`
	NotBefore int64    `json:"nbf"`
}

// audience is "aud", a string or a list of strings.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*a = many
	return nil
}

// errExpired is wrapped by Verify for a token past its exp (STS answers ExpiredTokenException).
var errExpired = errors.New("token is expired")

// Verify checks a compact JWS token's signature (ES256 or RS256) against keys, its audience, issuer
// (when issuer is not empty) and validity window, and returns its claims.
func Verify(token string, keys map[string]crypto.PublicKey, wantAudience, issuer string, now time.Time) (*Claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a compact JWS (want header.payload.signature)")
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodeSegment(parts[0], &header); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	key, ok := keys[header.Kid]
	if !ok {
		return nil, fmt.Errorf("signed with unknown key %q", header.Kid)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	switch pub := key.(type) {
	case *ecdsa.PublicKey:
		if header.Alg != "ES256" || len(sig) != 64 {
			return nil, fmt.Errorf("algorithm %s with an EC key: want ES256", header.Alg)
		}
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		if !ecdsa.Verify(pub, digest[:], r, s) {
			return nil, errors.New("bad signature")
		}
	case *rsa.PublicKey:
		if header.Alg != "RS256" {
			return nil, fmt.Errorf("algorithm %s with an RSA key: want RS256", header.Alg)
		}
		if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig); err != nil {
			return nil, errors.New("bad signature")
		}
	default:
		return nil, fmt.Errorf("unsupported key type %T", key)
	}
	var c Claims
	if err := decodeSegment(parts[1], &c); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	if issuer != "" && c.Issuer != issuer {
		return nil, fmt.Errorf("issuer %q: want %q", c.Issuer, issuer)
	}
	if !slices.Contains(c.Audience, wantAudience) {
		return nil, fmt.Errorf("audience %v does not include %q", []string(c.Audience), wantAudience)
	}
	if c.Expiry == 0 || !now.Before(time.Unix(c.Expiry, 0)) {
		return nil, fmt.Errorf("%w (exp %s)", errExpired, time.Unix(c.Expiry, 0).UTC().Format(time.RFC3339))
	}
	if c.NotBefore != 0 && now.Before(time.Unix(c.NotBefore, 0)) {
		return nil, fmt.Errorf("token not valid before %s", time.Unix(c.NotBefore, 0).UTC().Format(time.RFC3339))
	}
	return &c, nil
}

func decodeSegment(seg string, into any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}
