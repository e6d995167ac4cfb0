package cloud

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// tokenBumpTTL is how long a name keeps its bumped token before it goes back to the plain one.
const tokenBumpTTL = time.Hour

// clientToken derives the EC2 idempotency token from the CSI volume name (and a bump suffix after a
// parameter mismatch burned the previous one).
func (c *Cloud) clientToken(name string) string {
	c.mu.Lock()
	b, ok := c.tokenBumps[name]
	if ok && c.now().After(b.expires) {
		delete(c.tokenBumps, name)
		ok = false
	}
	c.mu.Unlock()
	base := name
	if ok {
		base = name + "-" + strconv.Itoa(b.n)
	}
	sum := sha256.Sum256([]byte(base))
	return hex.EncodeToString(sum[:])
}

// bumpToken moves name to the next token: EC2 remembers a token with its parameters for hours, so a request
// with new parameters under the old token would fail until then.
func (c *Cloud) bumpToken(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.tokenBumps[name]
	if !ok || c.now().After(b.expires) {
		b = bump{n: 1}
	}
	b.n++
	b.expires = c.now().Add(tokenBumpTTL)
	c.tokenBumps[name] = b
}
