// Package systemdexec reads the command lines of generated systemd
// services as systemd reads them, for tests that check or run them: an
// oracle written apart from the generator's own quoting.
package systemdexec

import (
	"errors"
	"strings"
)

// Split splits an Exec*= value into words: a leading "-" (failure
// ignored) dropped, words split on spaces with double quotes grouping and
// backslashes escaping, %% and $$ made single.
func Split(v string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted, escaped := false, false, false
	for _, r := range strings.TrimPrefix(v, "-") {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\':
			escaped, inWord = true, true
		case r == '"':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted || escaped {
		return nil, errors.New("unbalanced quoting")
	}
	if inWord {
		words = append(words, cur.String())
	}
	for i, w := range words {
		words[i] = strings.NewReplacer("%%", "%", "$$", "$").Replace(w)
	}
	return words, nil
}
