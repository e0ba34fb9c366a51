package containers

import (
	"reflect"
	"testing"
)

// TestLinkVariables: a link's variables as dockerd's default bridge gives
// them: the first TCP port as ALIAS_PORT, each port's four variables, a
// run of consecutive ports marked with _START and _END, the name, and the
// linked container's environment but HOME and PATH.
func TestLinkVariables(t *testing.T) {
	ports := []portProto{{80, "tcp"}, {81, "tcp"}, {82, "tcp"}, {90, "tcp"}, {53, "udp"}}
	got := linkVariables("my-db", "/app/my-db", "10.0.0.5", ports, []string{"PATH=/bin", "HOME=/root", "HOSTNAME=x", "container=podman", "PASS=s3cret"})
	p := func(port, proto string) []string {
		k := "MY_DB_PORT_" + port + "_" + proto
		lower := map[string]string{"TCP": "tcp", "UDP": "udp"}[proto]
		return []string{k + "=" + lower + "://10.0.0.5:" + port, k + "_ADDR=10.0.0.5", k + "_PORT=" + port, k + "_PROTO=" + lower}
	}
	var want []string
	want = append(want, "MY_DB_PORT=tcp://10.0.0.5:80")
	want = append(want, p("80", "TCP")...)
	want = append(want, p("81", "TCP")...)
	want = append(want, p("82", "TCP")...)
	want = append(want, "MY_DB_PORT_80_TCP_START=tcp://10.0.0.5:80", "MY_DB_PORT_80_TCP_PORT_START=80", "MY_DB_PORT_80_TCP_PORT_END=82", "MY_DB_PORT_82_TCP_END=tcp://10.0.0.5:82")
	want = append(want, p("90", "TCP")...)
	want = append(want, p("53", "UDP")...)
	want = append(want, "MY_DB_NAME=/app/my-db", "MY_DB_ENV_PASS=s3cret")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
	if got := linkVariables("db", "/app/db", "10.0.0.5", nil, nil); !reflect.DeepEqual(got, []string{"DB_NAME=/app/db"}) {
		t.Errorf("a link without ports: %v", got)
	}
}
