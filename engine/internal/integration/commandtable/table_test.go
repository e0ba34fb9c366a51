package commandtable

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// readmePath is the README holding the table, relative to this package.
const readmePath = "../../../../README.md"

// table names one command table of the README: the markers around it and
// the client every command starts with.
type table struct {
	start, end, client string
}

// The README's tables: podman --remote's and the docker CLI's.
var (
	podmanTable = table{start: "<!-- podman-commands:start -->", end: "<!-- podman-commands:end -->", client: "podman"}
	dockerTable = table{start: "<!-- docker-commands:start -->", end: "<!-- docker-commands:end -->", client: "docker"}
)

// Markers around the podman table (the tests of the parser use them).
var (
	tableStart = podmanTable.start
	tableEnd   = podmanTable.end
)

// Row statuses.
const (
	statusWorks  = "works"
	statusNotYet = "not yet"
	// statusPodman5 and statusPodman6: works with Podman 5's (5.4.2) and
	// 6's remote clients, or with 6's alone; older clients refuse the
	// command themselves, before any request.
	statusPodman5 = "podman 5"
	statusPodman6 = "podman 6"
)

// clientGeneration is the major version of the podman client a row needs
// (4 for the rows every client runs), 0 for a row that does not work yet.
func clientGeneration(status string) int {
	switch status {
	case statusWorks:
		return 4
	case statusPodman5:
		return 5
	case statusPodman6:
		return 6
	}
	return 0
}

// row is one line of the table: a podman command, the shell commands that
// prepare it, text its standard output must contain, and whether it works.
type row struct {
	line    int
	command string
	setup   string
	expect  string
	status  string
}

// readTable reads the rows of tbl in the README at path.
func readTable(path string, tbl table) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseTable(bufio.NewScanner(f), tbl)
}

// parseTable reads the markdown table between tableStart and tableEnd: a
// header, a separator, then rows of four cells (command, setup, output,
// status); commands are written in backticks, `\|` stands for a pipe.
func parseTable(sc *bufio.Scanner, tbl table) ([]row, error) {
	var rows []row
	inside, header, line := false, 0, 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == tbl.start:
			inside = true
			continue
		case text == tbl.end:
			if !inside {
				return nil, fmt.Errorf("line %d: %s before %s", line, tbl.end, tbl.start)
			}
			if len(rows) == 0 {
				return nil, fmt.Errorf("line %d: the table has no rows", line)
			}
			return rows, nil
		case !inside || !strings.HasPrefix(text, "|"):
			continue
		}
		if header < 2 {
			header++
			continue
		}
		cells := splitCells(text)
		if len(cells) != 4 {
			return nil, fmt.Errorf("line %d: %d cells, want 4 (command, setup, output, status)", line, len(cells))
		}
		r := row{line: line, status: cells[3]}
		for i, dst := range []*string{&r.command, &r.setup, &r.expect} {
			v, err := unquote(cells[i])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			*dst = v
		}
		if !strings.HasPrefix(r.command, tbl.client+" ") {
			return nil, fmt.Errorf("line %d: command %q does not start with %s", line, r.command, tbl.client)
		}
		if r.status != statusWorks && r.status != statusNotYet && (clientGeneration(r.status) == 0 || tbl.client != "podman") {
			return nil, fmt.Errorf("line %d: status %q, want %q or %q (or, for podman, %q or %q)", line, r.status, statusWorks, statusNotYet, statusPodman5, statusPodman6)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("no table between %s and %s", tbl.start, tbl.end)
}

// splitCells splits a table line at its unescaped pipes.
func splitCells(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] == '\\' && i+1 < len(line) && line[i+1] == '|' {
			cell.WriteString(`\|`)
			i++
			continue
		}
		if line[i] == '|' {
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
			continue
		}
		cell.WriteByte(line[i])
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// codeCell matches a cell written as one code span.
var codeCell = regexp.MustCompile("^`([^`]+)`$")

// unquote returns the text of a code cell with `\|` turned into `|`; an
// empty cell is "".
func unquote(cell string) (string, error) {
	if cell == "" {
		return "", nil
	}
	m := codeCell.FindStringSubmatch(cell)
	if m == nil {
		return "", fmt.Errorf("cell %q is not written in backticks", cell)
	}
	return strings.ReplaceAll(m[1], `\|`, "|"), nil
}

func TestParseTable(t *testing.T) {
	head := tableStart + "\n| Command | Setup | Output | Status |\n|---|---|---|---|\n"
	tests := []struct {
		name, text string
		want       []row
		wantErr    string
	}{
		{
			name: "rows",
			text: "intro\n" + head + "| `podman ps` |  | `ID` | works |\n| `podman a \\| grep b` | `podman x` |  | not yet |\n| `podman artifact ls` |  |  | podman 6 |\n" + tableEnd + "\n",
			want: []row{
				{line: 5, command: "podman ps", expect: "ID", status: "works"},
				{line: 6, command: "podman a | grep b", setup: "podman x", status: "not yet"},
				{line: 7, command: "podman artifact ls", status: "podman 6"},
			},
		},
		{name: "no table", text: "nothing here\n", wantErr: "no table"},
		{name: "empty", text: head + tableEnd + "\n", wantErr: "no rows"},
		{name: "bad status", text: head + "| `podman ps` | | | maybe |\n" + tableEnd, wantErr: `status "maybe"`},
		{name: "podman 7", text: head + "| `podman ps` | | | podman 7 |\n" + tableEnd, wantErr: `status "podman 7"`},
		{name: "three cells", text: head + "| `podman ps` | | works |\n" + tableEnd, wantErr: "3 cells"},
		{name: "not podman", text: head + "| `ls` | | | works |\n" + tableEnd, wantErr: "does not start with podman"},
		{name: "no backticks", text: head + "| podman ps | | | works |\n" + tableEnd, wantErr: "not written in backticks"},
		{name: "unterminated", text: head + "| `podman ps` | | | works |\n", wantErr: "no table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTable(bufio.NewScanner(strings.NewReader(tt.text)), podmanTable)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("rows\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestReadmeTableParses keeps the README's table well formed and its rows'
// names apart, even where podman is not installed.
func TestReadmeTableParses(t *testing.T) {
	checkTable(t, podmanTable, "the table", 80)
}

// TestReadmeDockerTableParses keeps the docker table well formed.
func TestReadmeDockerTableParses(t *testing.T) {
	checkTable(t, dockerTable, "the docker table", 40)
}

// checkTable reads a table of the README (named what in failures), which
// must have at least minRows rows, each with a command of its own.
func checkTable(t *testing.T, table table, what string, minRows int) {
	t.Helper()
	rows, err := readTable(readmePath, table)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rows {
		if prev, ok := seen[r.command]; ok {
			t.Errorf("line %d repeats the command of line %d: %s", r.line, prev, r.command)
		}
		seen[r.command] = r.line
	}
	if len(rows) < minRows {
		t.Errorf("%s has %d rows; it covers the everyday commands (at least %d)", what, len(rows), minRows)
	}
}
