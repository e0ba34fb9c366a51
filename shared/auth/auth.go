// Package auth holds what Berth's services share to authenticate clients and
// to be authenticated: bearer tokens read from a file and compared in constant
// time, and the TLS configurations of a server that may require client
// certificates and of a client that presents one.
package auth

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// LoadTokens reads bearer tokens from a file, one a line; blank lines and lines starting
// with "#" are skipped. A file without any token is an error, so that a mistake cannot
// silently turn authentication off.
func LoadTokens(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	defer f.Close()
	var tokens []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tokens = append(tokens, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", file, err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("tokens file %s holds no token", file)
	}
	return tokens, nil
}

// Tokens holds the SHA-256 digests of the accepted bearer tokens. Comparing digests
// of equal length in constant time, and always against every token, reveals neither
// a token's content nor its length through timing.
type Tokens struct{ digests [][sha256.Size]byte }

// NewTokens returns the set of tokens, or nil when there is none (no token
// authentication).
func NewTokens(tokens []string) *Tokens {
	if len(tokens) == 0 {
		return nil
	}
	ts := &Tokens{}
	for _, t := range tokens {
		ts.digests = append(ts.digests, sha256.Sum256([]byte(t)))
	}
	return ts
}

// Valid reports whether token is one of the set.
func (ts *Tokens) Valid(token string) bool {
	d := sha256.Sum256([]byte(token))
	match := 0
	for i := range ts.digests {
		match |= subtle.ConstantTimeCompare(d[:], ts.digests[i][:])
	}
	return match == 1
}

// Bearer returns the token of r's "Authorization: Bearer <token>" header
// (the scheme in any case) and whether there is one.
func Bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
