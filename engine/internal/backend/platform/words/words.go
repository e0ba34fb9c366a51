// Package words splits a value into words at white space outside quotes:
// the one splitter for systemd's Exec= and Environment= values (quadlets)
// and for the LABEL and ENV changes an image import applies. The two
// grammars differ only in what separates words and in whether a backslash
// escapes, which Rules says.
package words

import (
	"errors"
	"strings"
)

// Rules is one grammar.
type Rules struct {
	// Separators are the characters that end a word outside quotes.
	Separators string
	// Escapes makes a backslash take the next character as it is, inside
	// quotes too (systemd's rule).
	Escapes bool
}

// The errors Split answers; callers add the value they split.
var (
	ErrUnterminatedQuote = errors.New("unterminated quote")
	ErrTrailingBackslash = errors.New("trailing backslash")
)

// Split splits s by rules. Double or single quotes group and are removed;
// "" is one empty word.
func Split(s string, rules Rules) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case rules.Escapes && r == '\\':
			escaped = true
			inWord = true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote = r
			inWord = true
		case strings.ContainsRune(rules.Separators, r):
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
	if quote != 0 {
		return nil, ErrUnterminatedQuote
	}
	if escaped {
		return nil, ErrTrailingBackslash
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
