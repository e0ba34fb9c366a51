package files

import (
	"errors"
	"strings"
	"testing"
)

func TestValidatePath(t *testing.T) {
	cases := []struct {
		in   string
		want string // "" means refused
	}{
		{"", "."},
		{".", "."},
		{"a", "a"},
		{"a/b/c.tar", "a/b/c.tar"},
		{"dir.with.dots/..hidden", "dir.with.dots/..hidden"},
		{"...", "..."},
		{"a b/ü.txt", "a b/ü.txt"},
		{"100%", "100%"},
		{"50%25off", "50%25off"},
		{"..", ""},
		{"../etc/passwd", ""},
		{"a/../b", ""},
		{"a/..", ""},
		{"./a", ""},
		{"a/.", ""},
		{"a/./b", ""},
		{"a//b", ""},
		{"/a", ""},
		{"/", ""},
		{"//", ""},
		{"a/", ""},
		{"a\x00b", ""},
		{"\x00", ""},
		{"a\\b", ""},
		{"..\\..\\etc", ""},
		{"\\", ""},
		{"a\nb", ""},
		{"\xff\xfe", ""},
		{"%2e%2e", ""},
		{"%2e", ""},
		{"a/%2E", ""},
		{"%2E%2E", ""},
		{"a/%2e%2e/b", ""},
		{"%2e", ""},
		{"%252e%252e", ""},
		{"a%2fb", ""},
		{"a%2Fb", ""},
		{"%2f", ""},
		{"a%5cb", ""},
		{"a%00b", ""},
		{"%2e%2e%2fetc", ""},
		{"%25252e%25252e", ""},
		{strings.Repeat("n", 255), strings.Repeat("n", 255)},
		{"d/" + strings.Repeat("n", 256), ""},
	}
	for _, c := range cases {
		got, err := ValidatePath(c.in)
		if c.want == "" {
			if err == nil || !errors.Is(err, ErrInvalidPath) {
				t.Errorf("ValidatePath(%q) = %q, %v; want ErrInvalidPath", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ValidatePath(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestFromEscaped(t *testing.T) {
	cases := []struct {
		in   string
		want string
	}{
		{"", "."},
		{"a/b", "a/b"},
		{"a%20b/c", "a b/c"},
		{"%C3%BC", "ü"},
		{"%2e%2e", ""},
		{"%2e", ""},
		{"a/%2E", ""},
		{"%2E%2e/x", ""},
		{"a%2f..%2fb", ""},
		{"a%2Fb", ""},
		{"..%2f..%2fetc", ""},
		{"a%5c..%5cb", ""},
		{"a%00", ""},
		{"a//b", ""},
		{"/a", ""},
		{"%zz", ""},
		{"%252e%252e", ""},
		{"a/.", ""},
	}
	for _, c := range cases {
		got, err := FromEscaped(c.in)
		if c.want == "" {
			if !errors.Is(err, ErrInvalidPath) {
				t.Errorf("FromEscaped(%q) = %q, %v; want ErrInvalidPath", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("FromEscaped(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestDepth(t *testing.T) {
	for in, want := range map[string]int{".": 0, "a": 1, "a/b": 2, "a/b/c": 3} {
		if got := Depth(in); got != want {
			t.Errorf("Depth(%q) = %d, want %d", in, got, want)
		}
	}
}
