package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestNewLogger(t *testing.T) {
	var jsonOut bytes.Buffer
	logger := NewLogger(&jsonOut, "json", slog.LevelInfo)
	logger.Debug("hidden")
	logger.Info("shown", "key", "value")
	var record map[string]any
	if err := json.Unmarshal(jsonOut.Bytes(), &record); err != nil {
		t.Fatalf("json output %q: %v", jsonOut.String(), err)
	}
	if record["msg"] != "shown" || record["key"] != "value" || record["level"] != "INFO" {
		t.Fatalf("record %v", record)
	}

	var textOut bytes.Buffer
	logger = NewLogger(&textOut, "text", slog.LevelWarn)
	logger.Info("hidden")
	logger.Warn("careful", "n", 3)
	if out := textOut.String(); strings.Contains(out, "hidden") || !strings.Contains(out, "level=WARN msg=careful n=3") {
		t.Fatalf("text output %q", out)
	}
}

func TestParseLevelAndFormat(t *testing.T) {
	for text, want := range map[string]slog.Level{"debug": slog.LevelDebug, "INFO": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError} {
		if got, err := ParseLevel(text); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v", text, got, err)
		}
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Error("ParseLevel(loud) succeeded")
	}
	for text, want := range map[string]string{"json": "json", "JSON": "json", "text": "text", "": "text"} {
		if got, err := ParseLogFormat(text); err != nil || got != want {
			t.Errorf("ParseLogFormat(%q) = %q, %v", text, got, err)
		}
	}
	if _, err := ParseLogFormat("xml"); err == nil {
		t.Error("ParseLogFormat(xml) succeeded")
	}
}

func TestEnvOr(t *testing.T) {
	env := map[string]string{"SET": "tcp://127.0.0.1:9", "EMPTY": ""}
	getenv := func(key string) string { return env[key] }
	for _, tt := range []struct{ key, want string }{{"SET", "tcp://127.0.0.1:9"}, {"EMPTY", "fallback"}, {"UNSET", "fallback"}} {
		if got := EnvOr(getenv, tt.key, "fallback"); got != tt.want {
			t.Errorf("EnvOr(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
	if got := EnvOr(nil, "SET", "fallback"); got != "fallback" {
		t.Errorf("EnvOr(nil getenv) = %q", got)
	}
}
