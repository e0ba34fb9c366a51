package containers

// SetNameWords replaces the word lists generated names are drawn from, for
// tests that need generated names to collide; the returned function puts
// the real lists back.
func SetNameWords(adjectives, nouns []string) (restore func()) {
	oldAdj, oldNouns := nameAdjectives, nameNouns
	nameAdjectives, nameNouns = adjectives, nouns
	return func() { nameAdjectives, nameNouns = oldAdj, oldNouns }
}
