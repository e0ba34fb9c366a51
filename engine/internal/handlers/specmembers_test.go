package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// TestSpecMembersAcceptPodmanDefaults: the body podman --remote run 4.3.1
// sends (captured, with --init and --secret) decodes without a refusal.
func TestSpecMembersAcceptPodmanDefaults(t *testing.T) {
	body, err := os.ReadFile("testdata/create-podman-4.3.1.json")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := decodeSpec(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if !spec.Init || !spec.HTTPProxy || len(spec.Secrets) != 2 || spec.SecretEnv["TOKEN"] != "s3" {
		t.Fatalf("decoded %+v", spec)
	}
}

// TestSpecMembersRefused: a member the engine would ignore is a 400 naming
// it; zero values and the defaults it honours pass.
func TestSpecMembersRefused(t *testing.T) {
	for _, tc := range []struct {
		member, value string
		refused       bool
	}{
		{"colour", `"red"`, true},
		{"colour", `""`, false},
		{"colour", `{}`, false},
		{"colour", `{"a":null}`, true},
		{"devices", `[{"path":"/dev/null"}]`, false},
		{"Networks", `{"default":{"interface_name":""}}`, false},
		{"Networks", `{}`, false},
		{"Networks", `null`, false},
		{"portmappings", `[{"container_port":80,"host_port":8080}]`, false},
		{"publish_image_ports", `true`, false},
		{"expose", `{"90":"tcp"}`, false},
		{"netns", `{"nsmode":"bridge"}`, false},
		{"netns", `{"nsmode":"container","value":"abc"}`, false},
		{"netns", `{"nsmode":"none"}`, false},
		{"systemd", `"always"`, true},
		{"systemd", `"false"`, false},
		{"sdnotifyMode", `"conmon"`, true},
		{"log_configuration", `{"driver":"journald","tag":"web"}`, false},
		{"log_configuration", `{"driver":"k8s-file"}`, false},
		{"seccomp_policy", `"image"`, false},
		{"seccomp_profile_path", `"unconfined"`, false},
		{"mask", `["/proc/a"]`, false},
		{"cgroups_mode", `"disabled"`, false},
		{"idmappings", `{"HostUIDMapping":false,"UIDMap":[{"container_id":0,"host_id":1000,"size":1}]}`, false},
		{"idmappings", `{"AutoUserNs":true}`, false},
		{"ipcns", `{"nsmode":"host"}`, false},
		{"ipcns", `{"nsmode":"private"}`, false},
		{"utsns", `{"nsmode":"host"}`, false},
		{"userns", `{"nsmode":"auto"}`, false},
		{"cgroupns", `{"nsmode":"private"}`, false},
		{"cgroups_mode", `"no-conmon"`, false},
		{"cgroups_mode", `"split"`, false},
		{"cgroups_mode", `"sometimes"`, true},
		{"volatile", `true`, false},
		{"selinux_opts", `["disable"]`, false},
		{"selinux_opts", `["type:spc_t"]`, true},
		{"use_image_hosts", `true`, false},
		{"manage_password", `true`, false},
		{"init_container_type", `"always"`, false},
	} {
		body := `{"image":"busybox","` + tc.member + `":` + tc.value + `}`
		_, err := decodeSpec(strings.NewReader(body))
		var fe *core.FieldError
		switch {
		case tc.refused && (!errors.As(err, &fe) || fe.Field != tc.member):
			t.Errorf("%s: %v, want a 400 naming %s", body, err, tc.member)
		case !tc.refused && err != nil:
			t.Errorf("%s: %v, want it accepted", body, err)
		}
	}
}

// TestSpecMembersTakeEffect: every member of core.ContainerSpec is known
// to the refusal check, so none of them is refused for being unknown.
func TestSpecMembersTakeEffect(t *testing.T) {
	var members map[string]json.RawMessage
	full, _ := json.Marshal(core.ContainerSpec{Name: "x", Image: "busybox", Init: true, HTTPProxy: true})
	json.Unmarshal(full, &members)
	for name := range members {
		if !specMembers[name] {
			t.Errorf("%s is not a known member", name)
		}
	}
	if len(specMembers) < 50 {
		t.Fatalf("only %d members known", len(specMembers))
	}
}
