package server

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns a logger writing to w at level and above, as JSON lines
// when format is "json" and as logfmt-style text otherwise ("text").
func NewLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	options := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(format, "json") {
		return slog.New(slog.NewJSONHandler(w, options))
	}
	return slog.New(slog.NewTextHandler(w, options))
}

// ParseLogFormat checks a --log-format flag value: "json" or "text".
func ParseLogFormat(format string) (string, error) {
	switch strings.ToLower(format) {
	case "json":
		return "json", nil
	case "text", "":
		return "text", nil
	default:
		return "", fmt.Errorf("log format %q: want json or text", format)
	}
}

// ParseLevel reads a --log-level flag value: debug, info, warn or error
// (case-insensitive), or a slog offset such as "info+2".
func ParseLevel(text string) (slog.Level, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(text)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", text)
	}
	return level, nil
}
