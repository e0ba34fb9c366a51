package handlers

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHeldLines: held lines go out on release or on a successful finish,
// and are dropped when the work fails before any went out, so that the
// handler can still answer with the error's status.
func TestHeldLines(t *testing.T) {
	failedEarly := httptest.NewRecorder()
	h := holdLines(newJSONStream(failedEarly))
	h.send(pushReport{Stream: "Getting image source signatures\n"})
	if h.finish(true) || failedEarly.Body.Len() != 0 {
		t.Fatalf("a failure before release streamed %q", failedEarly.Body.String())
	}
	h.release() // the hold limit's timer firing late sends nothing
	if failedEarly.Body.Len() != 0 {
		t.Fatalf("a late release after a drop streamed %q", failedEarly.Body.String())
	}

	released := httptest.NewRecorder()
	h = holdLines(newJSONStream(released))
	h.send(pushReport{Stream: "one\n"})
	h.release()
	h.send(pushReport{Stream: "two\n"})
	if !h.finish(true) || strings.Count(released.Body.String(), "\n") != 2 || released.Code != 200 {
		t.Fatalf("released lines: %d %q", released.Code, released.Body.String())
	}

	quick := httptest.NewRecorder()
	h = holdLines(newJSONStream(quick))
	h.send(pushReport{Stream: "one\n"})
	if !h.finish(false) || !strings.Contains(quick.Body.String(), "one") {
		t.Fatalf("a success without release lost its lines: %q", quick.Body.String())
	}
}
