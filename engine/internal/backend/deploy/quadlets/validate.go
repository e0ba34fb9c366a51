package quadlets

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

// sectionOf maps each quadlet file extension to the section that describes
// its object.
var sectionOf = map[string]string{
	".container": "Container",
	".pod":       "Pod",
	".volume":    "Volume",
	".network":   "Network",
	".kube":      "Kube",
	".image":     "Image",
	".build":     "Build",
}

// IsQuadletFile reports whether name has a quadlet unit extension.
func IsQuadletFile(name string) bool {
	_, ok := sectionOf[filepath.Ext(name)]
	return ok
}

// UnitError is one problem in a unit file: the file, the line (0 when the
// problem is the file as a whole), the section and key, and why.
type UnitError struct {
	File    string
	Line    int
	Section string
	Key     string
	Reason  string
}

// Error reads "web.container line 4: [Container] key Imagee: unsupported key".
func (e *UnitError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	b.WriteString(": ")
	if e.Section != "" {
		fmt.Fprintf(&b, "[%s] ", e.Section)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, "key %s: ", e.Key)
	}
	b.WriteString(e.Reason)
	return b.String()
}

// entry is one key=value line of a unit file.
type entry struct {
	line    int
	section string
	key     string
	value   string
}

// unsupportedServiceKeys are [Service] keys Podman's generator refuses: the
// engine, not systemd, chooses the user the container runs as.
var unsupportedServiceKeys = map[string]bool{"User": true, "Group": true, "DynamicUser": true}

// booleanKeys are the keys whose value is a systemd boolean, per section.
var booleanKeys = map[string]map[string]bool{
	"Container": keySet("ReadOnly", "ReadOnlyTmpfs", "RunInit", "NoNewPrivileges", "SecurityLabelDisable",
		"SecurityLabelNested", "VolatileTmp", "EnvironmentHost", "StartWithPod"),
	"Network": keySet("DisableDNS", "Internal", "IPv6", "NetworkDeleteOnStop"),
	"Volume":  keySet("Copy"),
	"Kube":    keySet("KubeDownForce"),
	"Image":   keySet("AllTags", "TLSVerify"),
	"Build":   keySet("ForceRM", "TLSVerify"),
	"Quadlet": keySet("DefaultDependencies"),
}

// integerKeys are the keys whose value is a non-negative integer, per section.
var integerKeys = map[string]map[string]bool{
	"Container": keySet("Retry", "StopTimeout", "HealthRetries", "HealthMaxLogCount", "HealthMaxLogSize",
		"HealthStartupRetries", "HealthStartupSuccess", "RemapUidSize"),
	"Image": keySet("Retry"),
	"Build": keySet("Retry"),
	"Pod":   keySet("RemapUidSize"),
	"Kube":  keySet("RemapUidSize"),
}

// publishPort matches Podman's PublishPort forms:
// [[ip:][hostPort[-end]]:]containerPort[-end][/tcp|udp|sctp].
var publishPort = regexp.MustCompile(`^((\[[0-9a-fA-F:.]+\]|[0-9.]+)?:)?([0-9]+(-[0-9]+)?)?:?[0-9]+(-[0-9]+)?(/(tcp|udp|sctp))?$`)

// Validate checks one quadlet unit file named name (its extension chooses
// the kind): systemd unit syntax, the keys of the quadlet's sections and
// the values it can judge. It returns every problem found, in line order.
func Validate(name string, data []byte) []*UnitError {
	kind, ok := sectionOf[filepath.Ext(name)]
	if !ok {
		return []*UnitError{{File: name, Reason: fmt.Sprintf("%q is not a supported quadlet file type", filepath.Ext(name))}}
	}
	if _, err := unit.DeserializeOptions(bytes.NewReader(data)); err != nil {
		line, _ := scanEntries(data)
		return []*UnitError{{File: name, Line: line, Reason: "unit syntax: " + err.Error()}}
	}
	line, entries := scanEntries(data)
	if line > 0 {
		return []*UnitError{{File: name, Line: line, Reason: "unit syntax: not a section header, comment or key=value line"}}
	}
	var errs []*UnitError
	add := func(e entry, format string, args ...any) {
		errs = append(errs, &UnitError{File: name, Line: e.line, Section: e.section, Key: e.key, Reason: fmt.Sprintf(format, args...)})
	}
	values := map[string]string{}
	for _, e := range entries {
		switch {
		case e.section == kind || e.section == "Quadlet":
			if !sectionKeys[e.section][e.key] {
				add(e, "unsupported key in a %s unit", filepath.Ext(name))
				continue
			}
			if e.section == kind {
				values[e.key] = e.value
			}
			checkValue(e, add)
		case e.section == "Service" && unsupportedServiceKeys[e.key]:
			add(e, "not supported in the Service section of a quadlet")
		case e.section == "Service" && e.key == "Restart":
			if !systemdRestart[strings.TrimSpace(e.value)] {
				add(e, "Restart=%s is not a systemd restart setting", strings.TrimSpace(e.value))
			}
		}
	}
	for _, reason := range requiredKeys(kind, values) {
		errs = append(errs, &UnitError{File: name, Section: kind, Reason: reason})
	}
	return errs
}

// checkValue judges the value of a known key where its form is fixed.
func checkValue(e entry, add func(entry, string, ...any)) {
	v := strings.TrimSpace(e.value)
	switch {
	case booleanKeys[e.section][e.key]:
		if _, ok := parseBool(v); !ok {
			add(e, "%q is not a boolean", v)
		}
	case integerKeys[e.section][e.key]:
		if _, err := strconv.ParseUint(v, 10, 32); err != nil {
			add(e, "%q is not a non-negative integer", v)
		}
	case e.key == "PublishPort" && e.section != "Kube":
		if !publishPort.MatchString(v) {
			add(e, "%q is not a port mapping ([[ip:][hostPort]:]containerPort[/protocol])", v)
		}
	case e.key == "Pod" && e.section == "Container":
		if filepath.Ext(v) != ".pod" {
			add(e, "%q does not name a .pod quadlet", v)
		}
	case e.key == "Notify" && e.section == "Container":
		if _, ok := parseBool(v); !ok && v != "healthy" {
			add(e, "%q is not a boolean or \"healthy\"", v)
		}
	}
}

// systemdRestart are the values of systemd's Restart= (systemd.service(5)).
// Which of them a unit may use depends on who runs it: activation takes
// what RestartPolicy maps, a generated service what systemd allows for its
// type; the installer checks only that the value is systemd's.
var systemdRestart = map[string]bool{
	"": true, "no": true, "on-success": true, "on-failure": true, "on-abnormal": true,
	"on-watchdog": true, "on-abort": true, "always": true,
}

// RestartPolicy maps a [Service] Restart= value of a unit of the given
// kind (its section name) to the engine's restart policy. Only a
// container's service is restarted in a way the engine can do itself (no,
// on-failure, always); the other kinds are started once.
func RestartPolicy(kind, value string) (string, error) {
	v := strings.TrimSpace(value)
	switch {
	case v == "no" || v == "":
		return "no", nil
	case kind != "Container":
		return "", fmt.Errorf("Restart=%s: only a .container unit is restarted by the engine (want no)", v)
	case v == "always" || v == "on-failure":
		return v, nil
	case v == "on-success", v == "on-abnormal", v == "on-abort", v == "on-watchdog":
		return "", fmt.Errorf("Restart=%s has no engine restart policy (want no, on-failure or always)", v)
	}
	return "", fmt.Errorf("Restart=%s is not a systemd restart setting", v)
}

// Entry is one key=value line of a unit file: its line number, section,
// key and value (continuation lines joined).
type Entry struct {
	Line    int
	Section string
	Key     string
	Value   string
}

// Entries parses a unit file into its entries, in file order. The file
// must have passed Validate; lines that are not entries are skipped.
func Entries(data []byte) []Entry {
	_, entries := scanEntries(data)
	out := make([]Entry, len(entries))
	for i, e := range entries {
		out[i] = Entry{Line: e.line, Section: e.section, Key: e.key, Value: e.value}
	}
	return out
}

// Kind is the section that describes the object of unit file name
// ("Container" for web.container), "" for an unknown extension.
func Kind(name string) string { return sectionOf[filepath.Ext(name)] }

// ParseBool reads a systemd boolean; ok is false for anything else.
func ParseBool(v string) (value, ok bool) { return parseBool(v) }

func parseBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "yes", "y", "true", "t", "on":
		return true, true
	case "0", "no", "n", "false", "f", "off":
		return false, true
	}
	return false, false
}

// requiredKeys reports the keys a kind of quadlet cannot do without, as
// Podman's generator refuses them.
func requiredKeys(kind string, values map[string]string) []string {
	has := func(k string) bool { _, ok := values[k]; return ok }
	var missing []string
	switch kind {
	case "Container":
		switch {
		case !has("Image") && !has("Rootfs"):
			missing = append(missing, "no Image or Rootfs key specified")
		case has("Image") && has("Rootfs"):
			missing = append(missing, "the Image and Rootfs keys cannot be specified together")
		}
	case "Image":
		if !has("Image") {
			missing = append(missing, "no Image key specified")
		}
	case "Kube":
		if !has("Yaml") {
			missing = append(missing, "no Yaml key specified")
		}
	case "Build":
		if !has("ImageTag") {
			missing = append(missing, "no ImageTag key specified")
		}
		if !has("File") && !has("SetWorkingDirectory") {
			missing = append(missing, "neither SetWorkingDirectory nor File key specified")
		}
	case "Volume":
		if strings.TrimSpace(values["Driver"]) == "image" && !has("Image") {
			missing = append(missing, "the key Image is mandatory when using the image driver")
		}
	}
	return missing
}

// scanEntries splits a unit file into its key=value entries with their
// line numbers (continuation lines ending in a backslash are joined). It
// returns the number of the first line that is none of blank, comment,
// section header or key=value (0 when there is none).
func scanEntries(data []byte) (int, []entry) {
	var entries []entry
	section := ""
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		number := i + 1
		line := strings.TrimSpace(strings.TrimSuffix(lines[i], "\r"))
		switch {
		case line == "", line[0] == '#', line[0] == ';':
			continue
		case line[0] == '[':
			end := strings.IndexByte(line, ']')
			if end < 0 || strings.TrimSpace(line[end+1:]) != "" {
				return number, nil
			}
			section = line[1:end]
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" || section == "" {
			return number, nil
		}
		for strings.HasSuffix(value, "\\") && i+1 < len(lines) {
			i++
			value = strings.TrimSuffix(value, "\\") + " " + strings.TrimSpace(lines[i])
		}
		entries = append(entries, entry{line: number, section: section, key: key, value: strings.TrimSpace(value)})
	}
	return 0, entries
}
