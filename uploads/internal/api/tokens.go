package api

import (
	"bufio"
	"fmt"
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
