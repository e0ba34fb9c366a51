package listfilter

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
)

func TestHasLabel(t *testing.T) {
	labels := map[string]string{"app": "web", "empty": ""}
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{"app", true}, {"app=web", true}, {"app=db", false}, {"empty", true},
		{"empty=", true}, {"missing", false}, {"missing=", false},
	} {
		if got := HasLabel(labels, tc.filter); got != tc.want {
			t.Errorf("HasLabel(%q) = %v, want %v", tc.filter, got, tc.want)
		}
	}
}

func TestParseUntil(t *testing.T) {
	before := time.Now()
	for _, tc := range []struct {
		value string
		want  func(time.Time) bool
	}{
		{"1h", func(got time.Time) bool { d := before.Sub(got); return d > 59*time.Minute && d < 61*time.Minute }},
		{"1700000000", func(got time.Time) bool { return got.Equal(time.Unix(1700000000, 0)) }},
		{"1700000000.5", func(got time.Time) bool { return got.Equal(time.Unix(1700000000, 5e8)) }},
		{"2024-01-02T03:04:05Z", func(got time.Time) bool { return got.Equal(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)) }},
		{"2024-01-02T03:04:05", func(got time.Time) bool { return got.Equal(time.Date(2024, 1, 2, 3, 4, 5, 0, time.Local)) }},
		{"2024-01-02", func(got time.Time) bool { return got.Equal(time.Date(2024, 1, 2, 0, 0, 0, 0, time.Local)) }},
	} {
		got, err := ParseUntil(tc.value)
		if err != nil || !tc.want(got) {
			t.Errorf("ParseUntil(%q) = %v, %v", tc.value, got, err)
		}
	}
	for _, bad := range []string{"", "yesterday", "2024-13-01", "1h-"} {
		if _, err := ParseUntil(bad); err == nil {
			t.Errorf("ParseUntil(%q) accepted", bad)
		}
	}
}

type item struct {
	name, id, driver string
	labels           map[string]string
	created          time.Time
}

func TestCompile(t *testing.T) {
	now := time.Now()
	items := []item{
		{name: "web", id: "abc123", driver: "bridge", labels: map[string]string{"app": "web", "tier": "front"}, created: now.Add(-2 * time.Hour)},
		{name: "db", id: "abd456", driver: "macvlan", labels: map[string]string{"app": "db"}, created: now.Add(-time.Minute)},
		{name: "a+b", id: "ffe789", driver: "bridge", created: now},
	}
	rules := map[string]Rule[item]{
		"name":   Pattern(func(i item) string { return i.name }),
		"id":     Prefix(func(i item) string { return i.id }),
		"driver": Equal(func(i item) string { return i.driver }, "bridge", "macvlan"),
		"label":  Labels(func(i item) map[string]string { return i.labels }),
		"label!": Labels(func(i item) map[string]string { return i.labels }),
		"until":  CreatedBefore(func(i item) time.Time { return i.created }),
	}
	for _, tc := range []struct {
		filters map[string][]string
		want    []string
	}{
		{nil, []string{"web", "db", "a+b"}},
		{map[string][]string{"name": {}}, []string{"web", "db", "a+b"}},
		{map[string][]string{"name": {"^w"}}, []string{"web"}},
		{map[string][]string{"name": {"a+b"}}, []string{"a+b"}},
		{map[string][]string{"name": {"web", "db"}}, []string{"web", "db"}},
		{map[string][]string{"id": {"ab"}}, []string{"web", "db"}},
		{map[string][]string{"id": {"bc"}}, nil},
		{map[string][]string{"driver": {"bridge"}, "name": {`\+`}}, []string{"a+b"}},
		{map[string][]string{"label": {"app", "tier=front"}}, []string{"web"}},
		{map[string][]string{"label!": {"app=web"}}, []string{"db", "a+b"}},
		{map[string][]string{"label!": {"app", "tier"}}, []string{"a+b"}},
		{map[string][]string{"until": {"1h"}}, []string{"web"}},
		{map[string][]string{"until": {"1h", "30s"}}, []string{"web", "db"}},
	} {
		test, err := Compile("thing", tc.filters, rules)
		if err != nil {
			t.Fatalf("%v: %v", tc.filters, err)
		}
		var got []string
		for _, it := range items {
			ok, err := test(context.Background(), it)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				got = append(got, it.name)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: got %v, want %v", tc.filters, got, tc.want)
		}
	}
	for _, tc := range []struct {
		filters map[string][]string
		want    string
	}{
		{map[string][]string{"colour": {"red"}}, `"colour" is not a thing filter (driver, id, label, label!, name, until)`},
		{map[string][]string{"name": {"("}}, `name="(" is not a regular expression`},
		{map[string][]string{"driver": {"ipvlan"}}, `driver="ipvlan" is not one of bridge, macvlan`},
		{map[string][]string{"label": {"=x"}}, `label="=x" needs a key`},
		{map[string][]string{"until": {"soon"}}, `until="soon" is not a time`},
	} {
		_, err := Compile("thing", tc.filters, rules)
		var fe *core.FieldError
		if !errors.As(err, &fe) || fe.Field != "filters" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want an invalid filters argument saying %q", tc.filters, err, tc.want)
		}
	}
}

func TestBoolsAndInts(t *testing.T) {
	if got, err := Bools("dangling", []string{"true", "1", "false"}); err != nil || !got[true] || !got[false] {
		t.Errorf("Bools = %v, %v", got, err)
	}
	if _, err := Bools("dangling", []string{"maybe"}); err == nil {
		t.Error("Bools accepted maybe")
	}
	if got, err := Ints("ctr-number", []string{"0", "2"}, 0); err != nil || !slices.Equal(got, []int{0, 2}) {
		t.Errorf("Ints = %v, %v", got, err)
	}
	for _, bad := range []string{"-1", "two", ""} {
		if _, err := Ints("ctr-number", []string{bad}, 0); err == nil {
			t.Errorf("Ints accepted %q", bad)
		}
	}
}
