package enginetest

import (
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/criutest"
)

// RequireCRIU is criutest.Require: a working CRIU, or the test skips (fails
// under BERTH_TEST_STRICT=1). Engines get it as engine.Config.CRIU or
// through the inherited BERTH_ENGINE_CRIU.
func RequireCRIU(t testing.TB) string { return criutest.Require(t) }

// FindCRIU is criutest.Find.
func FindCRIU() (string, error) { return criutest.Find() }
