package words

import (
	"errors"
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	systemd := Rules{Separators: " \t\n", Escapes: true}
	changes := Rules{Separators: " \t"}
	for _, c := range []struct {
		in    string
		rules Rules
		want  []string
		err   error
	}{
		{in: "a b\t c", rules: systemd, want: []string{"a", "b", "c"}},
		{in: "a\nb", rules: systemd, want: []string{"a", "b"}},
		{in: "a\nb", rules: changes, want: []string{"a\nb"}},
		{in: `A="x y" B='z' C=w\ v`, rules: systemd, want: []string{"A=x y", "B=z", "C=w v"}},
		{in: `sh -c "echo \"hi\""`, rules: systemd, want: []string{"sh", "-c", `echo "hi"`}},
		{in: `a=b\ c`, rules: changes, want: []string{`a=b\`, "c"}},
		{in: `k="v 2" x='y'`, rules: changes, want: []string{"k=v 2", "x=y"}},
		{in: `""`, rules: changes, want: []string{""}},
		{in: "", rules: changes, want: nil},
		{in: `"open`, rules: changes, err: ErrUnterminatedQuote},
		{in: `x\`, rules: systemd, err: ErrTrailingBackslash},
		{in: `x\`, rules: changes, want: []string{`x\`}},
	} {
		got, err := Split(c.in, c.rules)
		if !errors.Is(err, c.err) || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Split(%q, %+v) = %q, %v; want %q, %v", c.in, c.rules, got, err, c.want, c.err)
		}
	}
}
