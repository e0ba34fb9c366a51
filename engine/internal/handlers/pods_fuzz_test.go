package handlers

import (
	"bytes"
	"testing"
)

// FuzzDecodePodSpec feeds arbitrary bodies to the pod creation decoder: it
// must never panic, and every rejection must be a 400 that names a field.
func FuzzDecodePodSpec(f *testing.F) {
	f.Add([]byte(`{"name":"p1","hostname":"hh","exit_policy":"continue","labels":{"a":"b"},"shared_namespaces":["net","ipc","uts","pid"],"share_parent":true,"pidns":{"nsmode":"private"},"userns":{},"utsns":{},"netns":{},"portmappings":[{"host_ip":"","container_port":80,"host_port":8080,"range":1,"protocol":""}],"Networks":null,"resource_limits":{"cpu":{}},"idmappings":{"HostUIDMapping":true,"HostGIDMapping":true,"UIDMap":null,"GIDMap":null,"AutoUserNs":false}}`))
	f.Add([]byte(`{"name":"p2","exit_policy":"continue","no_infra":true,"pidns":{"nsmode":"private"},"userns":{},"utsns":{},"netns":{},"Networks":null,"resource_limits":{"cpu":{}}}`))
	f.Add([]byte(`{"name":"p3","unknown_option":1}`))
	f.Add([]byte(`{"labels":[1]}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := decodePodSpec(bytes.NewReader(body))
		requireFieldRejection(t, err)
	})
}
