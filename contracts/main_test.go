package contracts

import (
	"os"
	"testing"

	"github.com/pact-foundation/pact-go/v2/log"
)

func TestMain(m *testing.M) {
	// The Pact core reports usage to a remote service unless told not to;
	// tests talk to loopback only.
	os.Setenv("PACT_DO_NOT_TRACK", "true")
	// Mismatches and the verification report are printed at any level; INFO
	// (pact-go's default) adds every request the mock server and verifier
	// handle. PACT_LOG_LEVEL still chooses, when set.
	if os.Getenv("PACT_LOG_LEVEL") == "" {
		_ = log.SetLogLevel("WARN")
	}
	os.Exit(m.Run())
}
